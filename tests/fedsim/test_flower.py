"""The Flower engine: the app on Flower's simulation engine against the in-process engine.

Each simulation starts Ray (about 20 s here), so one run covers sampling, server momentum and
the results folder; the checks without Ray cover the records and the node checks.
"""

import json
import subprocess
import time

import pytest
import torch

from fedsim.config import RunConfig
from fedsim.engines.flower.client_app import ClientWorker
from fedsim.engines.flower.records import from_record, from_run_config, state_names, to_record, to_run_config
from fedsim.engines.inprocess import run
from fedsim.models import create_model
from fedsim.results import read_rows

EXACT = {"rtol": 1e-10, "atol": 1e-10}
# 4 clients of the 8x8 digits, half sampled per round by fedsim's seeded sampler, FedAvgM on the server
FEDAVG = {"strategy": "fedavg", "dataset": "digits", "model": "mlp", "num_partitions": 4, "fraction": 0.5,
          "rounds": 2, "batch_size": 10, "lr": 0.1, "local_steps": 5, "server_momentum": 0.5, "dtype": "float64"}


def ray_processes() -> list[str]:
    listing = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in listing.splitlines() if "ray::" in line or "raylet" in line or "gcs_server" in line]


@pytest.mark.slow
def test_flower_simulation_equals_in_process_and_writes_the_same_folder(tmp_path):
    from fedsim.engines.flower import simulate

    config = RunConfig(**FEDAVG)
    flower = simulate(config, tmp_path / "flower")
    expected = run(config, tmp_path / "inprocess")
    torch.testing.assert_close(flower.global_state, expected.global_state, **EXACT)
    flower_rows, expected_rows = (read_rows(tmp_path / name / "metrics.csv") for name in ("flower", "inprocess"))
    for row in (*flower_rows, *expected_rows):
        row.pop("wall_s")
    assert flower_rows == expected_rows
    assert (json.loads((tmp_path / "flower" / "config.json").read_text())
            == json.loads((tmp_path / "inprocess" / "config.json").read_text()))
    assert sorted(path.name for path in (tmp_path / "flower").iterdir()) == sorted(
        path.name for path in (tmp_path / "inprocess").iterdir())
    deadline = time.monotonic() + 30
    while ray_processes() and time.monotonic() < deadline:  # Ray's processes exit just after its shutdown
        time.sleep(0.5)
    assert ray_processes() == []


def test_models_travel_by_name_and_keep_float64_bit_for_bit():
    model = create_model("cnn", num_classes=10, in_channels=1, image_size=8, norm="batch").double()
    names = state_names(model)
    tensors = [torch.randn_like(tensor) for tensor in [*model.parameters(), *model.buffers()]
               if tensor.is_floating_point()]
    back = from_record(to_record(names, tensors), names, tensors)
    assert all(torch.equal(a, b) and a.dtype == b.dtype == torch.float64 for a, b in zip(back, tensors))
    with pytest.raises(ValueError, match="lacks 1 of the model's tensors"):
        from_record(to_record(names[:-1], tensors[:-1]), names, tensors)


def test_the_run_config_travels_as_flower_run_config_entries():
    config = RunConfig(**FEDAVG, dataset_options={"image_size": 8})
    entries = to_run_config(config)
    assert entries["server-momentum"] == 0.5 and entries["dataset-options"] == '{"image_size": 8}'
    assert all(isinstance(value, (int, float, str, bool)) for value in entries.values())
    assert from_run_config(entries) == config
    with pytest.raises(ValueError, match="unknown key 'rounds_total' in the Flower run config"):
        from_run_config({**entries, "rounds-total": 3})


@pytest.mark.parametrize("node_config, message", [
    ({}, "no `partition-id` in its node config"),
    ({"partition-id": 4, "num-partitions": 4}, r"`partition-id`=4 is outside the run's partitions 0\.\.3"),
    ({"partition-id": 1, "num-partitions": 5}, "`num-partitions`=5 but the run has `num_partitions`=4"),
])
def test_a_node_whose_partition_does_not_fit_the_run_is_refused(node_config, message):
    worker = ClientWorker(RunConfig(**FEDAVG))
    with pytest.raises(ValueError, match=message):
        worker.partition_id(node_config)
    assert worker.partition_id({"partition-id": 3, "num-partitions": 4}) == 3
