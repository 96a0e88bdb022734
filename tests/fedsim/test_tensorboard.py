"""``--tensorboard DIR``: every metric of ``metrics.csv`` as TensorBoard scalars, one run per strategy."""

import importlib.util
import shutil

import pytest

from fedsim.cli import main
from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.results.folder import read_rows

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

SMALL = {"dataset": "digits", "model": "mlp", "num_partitions": 4, "rounds": 4, "batch_size": 50,
         "local_test_fraction": 0.2}


def scalars(folder) -> dict:
    """Return TensorBoard's view of a run's folder: tag -> [(step, value)]."""
    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(event.step, event.value) for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_every_metric_is_a_scalar_per_round_and_a_resumed_run_shows_each_round_once(tmp_path):
    config = RunConfig(**SMALL, tensorboard=str(tmp_path / "tb"))
    run(config, tmp_path / "straight")
    rows = read_rows(tmp_path / "straight" / "metrics.csv")
    logged = scalars(tmp_path / "tb" / "fedavg")
    for tag in ("test_accuracy", "train_loss", "bytes_communicated", "client_acc_p10", "client_acc_worst10",
                "client_acc_mean"):
        assert logged[tag] == [(row["round"], pytest.approx(row[tag], rel=1e-6)) for row in rows], tag
    # killed after its round-2 checkpoint, having logged round 3 since: resumed, rounds 3 and 4 show once
    killed = config.replace(tensorboard=str(tmp_path / "tb-killed"))
    run(killed.replace(rounds=2), tmp_path / "killed")
    shutil.copytree(tmp_path / "killed", tmp_path / "longer")
    run(killed.replace(rounds=3), tmp_path / "longer", resume=True)
    run(killed, tmp_path / "killed", resume=True)
    resumed = scalars(tmp_path / "tb-killed" / "fedavg")["test_accuracy"]
    assert [step for step, _ in resumed] == [1, 2, 3, 4]
    assert [value for _, value in resumed] == [pytest.approx(value, rel=1e-6) for _, value in logged["test_accuracy"]]


def test_without_the_package_the_flag_is_refused_with_the_install_line(tmp_path, monkeypatch, capsys):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "tensorboard" else find_spec(name, *args))
    with pytest.raises(SystemExit):
        main(["run", "--dataset", "digits", "--tensorboard", str(tmp_path / "tb"), "--out", str(tmp_path / "r")])
    assert capsys.readouterr().err.strip() == (
        "fedsim run: error: `--tensorboard` writes TensorBoard's event files with the tensorboard package, which is "
        "not installed: pip install 'fedsim[tensorboard]'")
    assert not (tmp_path / "r").exists() and not (tmp_path / "tb").exists()
