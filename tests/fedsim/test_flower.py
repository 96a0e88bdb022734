"""The Flower engine: the app on Flower's simulation engine against the in-process engine.

Each simulation starts Ray (about 20 s here), so one run covers sampling, server momentum and
the results folder; the checks without Ray cover the records and the node checks.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
import torch

from fedsim.comparison import compare
from fedsim.config.run_config import RunConfig
from fedsim.engines.flower.client_app import ClientWorker
from fedsim.engines.flower.launch import FLOWER_LOG
from fedsim.engines.flower.records import (from_record, from_run_config, grid_entry, grid_from_entry, state_names,
                                          to_record, to_run_config)
from fedsim.engines.inprocess import run
from fedsim.rounds.fedavg import FedAvgRounds
from fedsim.models import create_model
from fedsim.results.folder import read_rows, saved_settings
from fedsim.schedule import SampleGrid

from .numerics import EXACT, assert_rows_close, relative_distance

FLOWER_PROCESSES = ("flower-superlink", "flower-supernode", "flower-superexec", "flwr-serverapp", "flwr-clientapp",
                    "flwr-simulation", "flwr run")
# 4 clients of the 8x8 digits, half sampled per round by fedsim's seeded sampler, FedAvgM on the server
FEDAVG = {"strategy": "fedavg", "dataset": "digits", "model": "mlp", "num_partitions": 4, "fraction": 0.5,
          "rounds": 2, "batch_size": 10, "lr": 0.1, "local_steps": 5, "server_momentum": 0.5, "dtype": "float64"}


#: Set to a new value for each test: every process a test starts inherits it, even one that detaches from
#: its parent (`flwr run`'s SuperLink), so a test can tell its own processes from another run's on the machine.
TEST_MARK = "FEDSIM_TEST_PROCESSES"


@pytest.fixture(autouse=True)
def mark_this_tests_processes(monkeypatch):
    monkeypatch.setenv(TEST_MARK, uuid.uuid4().hex)


def started_by_this_test(pid: str) -> bool:
    """Whether process ``pid`` carries this test's mark in its environment (`TEST_MARK`)."""
    mark = f"{TEST_MARK}={os.environ[TEST_MARK]}".encode()
    try:
        return mark in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # it has exited, or is not ours to read
        return False


def processes_named(names) -> list[str]:
    """Return this test's running processes (not zombies) whose command line holds one of ``names``."""
    listing = subprocess.run(["ps", "-ww", "-eo", "pid,stat,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in listing.splitlines()[1:]
            if any(name in line for name in names) and line.split()[1][0] != "Z" and " ps -ww " not in line
            and started_by_this_test(line.split()[0])]


def ray_processes() -> list[str]:
    return processes_named(("ray::", "raylet", "gcs_server"))


def wait_until_gone(list_processes, timeout: float = 30.0) -> list[str]:
    """Wait until ``list_processes()`` is empty (processes exit just after being stopped); return what is left."""
    deadline = time.monotonic() + timeout
    while list_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    return list_processes()


def fedsim(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "fedsim", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def flags(settings: dict) -> list[str]:
    return [word for key, value in settings.items() for word in (f"--{key.replace('_', '-')}", str(value))]


@pytest.mark.slow
@pytest.mark.numerics
def test_flower_simulation_resumed_equals_in_process_and_writes_the_same_folder(tmp_path):
    from fedsim.engines.flower import simulate

    # every client evaluated on its local test set (fine-tuned too); one client held out, never sampled; sampled
    # clients that fail to return, and stragglers that take fewer local steps, drawn alike on both engines; client-level
    # DP on Poisson rounds with an adaptive clip: the noise, the clip and the epsilon go on across the resume, and
    # round 2's one client fails to return, so that its server releases the noise alone
    config = RunConfig(**FEDAVG, local_test_fraction=0.25, personalize_steps=2, holdout_clients=0.25,
                       client_dropout=0.4, stragglers=0.5, client_sampling="poisson", dp_clip=0.5, dp_noise=0.7,
                       dp_adaptive_quantile=0.5, dp_count_noise=1.0)
    simulate(config.replace(rounds=1), tmp_path / "flower")  # then resumed: FedAvgM's momentum comes back too
    # resumed from the command line, as a user would, with the settings the folder recorded
    resumed = fedsim("flower", "simulate", "--resume", "--rounds", str(config.rounds), "--quiet",
                     "--out", str(tmp_path / "flower"))
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "resumed from the checkpoint of round 1" in (tmp_path / "flower" / "log.txt").read_text()
    expected = run(config, tmp_path / "inprocess")
    torch.testing.assert_close(torch.load(tmp_path / "flower" / "model.pt", weights_only=True)["state"],
                               expected.global_state, **EXACT)
    # a Ray actor trains with one torch thread, this process with two: sums in other orders
    assert_rows_close(*(read_rows(tmp_path / name / "metrics.csv") for name in ("flower", "inprocess")))
    flower_rows = read_rows(tmp_path / "flower" / "metrics.csv")
    assert sum(row["dropped_clients"] for row in flower_rows) > 0
    assert [row["clients"] for row in flower_rows] == [row["clients"] for row in expected.rows]
    assert flower_rows[1]["epsilon"] > flower_rows[0]["epsilon"] > 0 and flower_rows[1]["dp_clip"] != 0.5
    flower_clients, clients = (read_rows(tmp_path / name / "clients.csv") for name in ("flower", "inprocess"))
    assert len(clients) == 2 * 4  # each client, each round, once: the resumed run took up after round 1
    assert_rows_close(flower_clients, clients)
    # the same settings; the environment differs by the resume it records
    assert (saved_settings(json.loads((tmp_path / "flower" / "config.json").read_text()))
            == saved_settings(json.loads((tmp_path / "inprocess" / "config.json").read_text())))
    # the same files, and Flower's log of both runs (the first and the resumed) beside them
    assert sorted(path.name for path in (tmp_path / "flower").iterdir()) == sorted(
        [FLOWER_LOG, *(path.name for path in (tmp_path / "inprocess").iterdir())])
    assert (tmp_path / "flower" / FLOWER_LOG).read_text().count("Starting Flower Simulation") == 2
    assert wait_until_gone(ray_processes) == []


# 3 ranks of the digits under Dir(0.5), one Flower round per gradient step
GRADIENT = {"dataset": "digits", "num_partitions": 3, "partition": "dirichlet", "alpha": 0.5, "rounds": 2, "lr": 0.1}


def rows_of(*folders) -> list[list[dict]]:
    return [read_rows(folder / "metrics.csv") for folder in folders]


@pytest.mark.slow
@pytest.mark.numerics
def test_reweighted_on_flower_resumed_equals_in_process_step_for_step(tmp_path):
    """Dynamic weights over a cnn whose BatchNorm statistics are each rank's own, three steps a round, resumed."""
    from fedsim.engines.flower import simulate

    config = RunConfig(**GRADIENT, strategy="reweighted", weights="dynamic", model="cnn", norm="batch",
                       batch_size=200, dtype="float64")
    simulate(config.replace(rounds=1), tmp_path / "flower")  # then resumed from the step it stopped at
    flower = simulate(config, tmp_path / "flower", resume=True)
    expected = run(config, tmp_path / "inprocess")
    torch.testing.assert_close(flower.global_state, expected.global_state, **EXACT)
    # the clients also send their BatchNorm statistics up, which a DDP rank keeps
    assert_rows_close(*rows_of(tmp_path / "flower", tmp_path / "inprocess"), skip=("bytes_up", "bytes_communicated"))
    assert wait_until_gone(ray_processes) == []


@pytest.mark.slow
@pytest.mark.numerics
def test_compare_on_flower_runs_allreduce_as_fedsgd_equal_to_in_process_in_float32(tmp_path):
    """Full-shard batches, one step a round: FedSGD. float32 agrees in norm (DESIGN "Numerics")."""
    config = RunConfig(**{**GRADIENT, "strategy": "allreduce", "model": "mlp", "batch_size": 2000, "rounds": 3})
    flower = compare(config, ["allreduce"], tmp_path / "flower", engine="flower")["allreduce"]
    expected = compare(config, ["allreduce"], tmp_path / "inprocess")["allreduce"]
    assert [row["samples_seen"] for row in flower.rows] == [1438, 2876, 4314]  # every sample once a round
    assert relative_distance(flower.global_state, expected.global_state) < 1e-4
    # float32 losses and accuracies after other summation orders are not compared; the counts are
    assert_rows_close(*rows_of(tmp_path / "flower", tmp_path / "inprocess"),
                      skip=("train_loss", "test_loss", "test_accuracy"))
    assert sorted(path.name for path in (tmp_path / "flower" / "allreduce").iterdir()) == sorted(
        [FLOWER_LOG, *(path.name for path in (tmp_path / "inprocess" / "allreduce").iterdir())])
    assert sorted(path.name for path in (tmp_path / "flower").iterdir()) == sorted(
        path.name for path in (tmp_path / "inprocess").iterdir())
    assert wait_until_gone(ray_processes) == []


#: What Flower's and Ray's log holds, and a quiet run keeps off the terminal (in each run's flower.log)
FLOWER_LOG_WORDS = ("INFO", "WARNING", "Starting Flower Simulation", "fraction_evaluate", "deprecated", "Ray")


@pytest.mark.slow
def test_on_flower_the_terminal_shows_fedsims_progress_and_flowers_log_stays_in_each_run_folder(tmp_path):
    ray_sessions = set(Path("/tmp/ray").glob("session_*"))
    small = ["--dataset", "digits", "--model", "mlp", "--num-partitions", "2", "--rounds", "1", "--batch-size", "50"]
    quiet = fedsim("compare", "--engine", "flower", "--strategies", "fedavg,allreduce", *small,
                   "--out", str(tmp_path / "quiet"))
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert not [word for word in FLOWER_LOG_WORDS if word in quiet.stdout + quiet.stderr], quiet.stdout + quiet.stderr
    assert "fedavg: 100%" in quiet.stderr and "allreduce: 100%" in quiet.stderr  # fedsim's progress, one bar each
    assert "final acc" in quiet.stdout
    for name in ("fedavg", "allreduce"):
        assert "Starting Flower Simulation" in (tmp_path / "quiet" / name / FLOWER_LOG).read_text()
    # (--verbose, which shows that log instead, is checked with a diverging run in test_divergence.py)
    # Ray's sessions were in each federation's own short temporary folder, not Ray's default
    assert set(Path("/tmp/ray").glob("session_*")) == ray_sessions
    assert wait_until_gone(lambda: processes_named(FLOWER_PROCESSES)) == []


@pytest.mark.slow
@pytest.mark.numerics
def test_scaffold_with_fedadam_on_flower_equals_in_process(tmp_path):
    """Half the clients a round for 3 rounds: some train twice, from the state they kept on their node.

    SCAFFOLD's control variates travel both ways with the model: the server's ``c`` broadcast,
    each client's share of its change in the reply. One simulation covers what a node keeps and
    what the server broadcasts; a combination that is not linear runs on Flower in
    test_references.py, with a user's method that keeps a state of its own. (FedNova, which
    changes only the server's weights, is compared on DDP in test_distributed.)
    """
    config = RunConfig(**{**FEDAVG, "rounds": 3, "server_momentum": 0.0, "server_optimizer": "adam",
                          "server_lr": 0.01})
    strategies = ["scaffold"]
    flower = compare(config, strategies, tmp_path / "flower", engine="flower")
    expected = compare(config, strategies, tmp_path / "inprocess")
    assert list(expected) == ["scaffold+fedadam"]  # the run named for what ran
    for name in expected:
        torch.testing.assert_close(flower[name].global_state, expected[name].global_state, **EXACT)
        assert_rows_close(*rows_of(tmp_path / "flower" / name, tmp_path / "inprocess" / name))
    with pytest.raises(ValueError, match="`strategy`='scaffold' keeps each client's state on its Flower node"):
        compare(config, ["scaffold"], tmp_path / "flower", engine="flower", resume=True)
    assert wait_until_gone(ray_processes) == []


# 2 SuperNodes, every client every round: round 1 equals in-process; then SuperNode 1 is killed. The strategy
# and the model are the user's, imported from a folder outside the repository by every Flower process.
DEPLOYED = {**FEDAVG, "num_partitions": 2, "fraction": 1.0, "rounds": 2, "strategy": "my_fedprox.py:MyFedProx",
            "model": "mynets.mlp:two_layers"}
USER_CODE = {
    "mynets/__init__.py": "",
    "mynets/mlp.py": """
        from torch import nn

        def two_layers(num_classes, in_channels, image_size):
            return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * image_size**2, 16), nn.ReLU(),
                                 nn.Linear(16, num_classes))
    """,
    "my_fedprox.py": """
        from fedsim import Algorithm, LocalTerms, Option

        class Proximal(LocalTerms):
            def __init__(self, anchor, mu):
                self.anchor, self.mu = anchor, mu

            def penalty(self, params):
                return self.mu / 2 * sum(((w - a) ** 2).sum() for w, a in zip(params, self.anchor))

        class MyFedProx(Algorithm):
            name = "my-fedprox"
            options = {"mu": Option(0.01, low=0.0)}

            def local_terms(self, client, global_state):
                return Proximal(global_state[: self.num_params], self.option("mu"))
    """,
}


@pytest.fixture
def user_code(tmp_path, monkeypatch):
    """A folder outside the repository holding `USER_CODE`, the current folder; its modules are forgotten after."""
    user = tmp_path / "user"
    for name, text in USER_CODE.items():
        (user / name).parent.mkdir(parents=True, exist_ok=True)
        (user / name).write_text(textwrap.dedent(text))
    monkeypatch.chdir(user)
    monkeypatch.delenv("FEDSIM_START_FOLDER", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield user
    for module in [name for name in sys.modules if name.split(".")[0] == "mynets"]:
        del sys.modules[module]


def without_client(lost: int, from_round: int):
    """Return `FedAvgRounds.sampled_clients` less client ``lost`` from round index ``from_round`` on."""
    sampled_clients = FedAvgRounds.sampled_clients

    def sampled(self, round_index):
        clients = sampled_clients(self, round_index)
        return [client for client in clients if round_index < from_round or client != lost]

    return sampled


# Not among the numerics that `.ci/run` reruns under a second arithmetic: its sums are the simulation's, which
# are rerun; what it adds is the deployment (TLS, authentication, a lost node, user code on the nodes).
@pytest.mark.slow
def test_supernodes_over_tls_lose_one_and_end_as_in_process_without_its_client(tmp_path, monkeypatch, user_code):
    """A SuperLink and 2 authenticated SuperNodes over TLS; SuperNode 1 is SIGKILLed on receiving round 2's model.

    It dies holding the message, before the ClientApp process that would train on it has even
    imported torch, so on a machine of any speed round 1 has both clients and round 2 loses
    client 1. Round 2 goes on with client 0 (the server waits `--timeout` seconds for the lost node's reply,
    or skips it once the SuperLink has marked it offline), and the run ends with the parameters
    of in-process FedAvg whose round 2 samples client 0 alone.

    The run starts in a folder outside the repository that holds the user's strategy (a file) and
    model (a package): the ServerApp and every ClientApp process import them from there.
    """
    assert fedsim("flower", "certs", str(tmp_path / "certs")).returncode == 0
    assert (tmp_path / "certs" / "server.key").stat().st_mode & 0o777 == 0o600
    out = tmp_path / "flower"
    # --timeout: how long a round waits for its replies; round 1's must come from ClientApp processes that each
    # import torch afresh, which takes seconds on a busy 2-core machine, so 15 rather than the lost node's few
    launcher = subprocess.Popen([sys.executable, "-m", "fedsim", "flower", "deploy", "--tls", str(tmp_path / "certs"),
                                 "--auth", *flags(DEPLOYED), "--algorithm-option", "mu=0.1", "--timeout", "15",
                                 "--quiet", "--out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        node = wait_for_train_messages(launcher, "partition-id=1 num-partitions=2", count=2, timeout=180)
        os.kill(node, signal.SIGKILL)
        # as a ServerApp process ended in the middle of a write leaves it: gone once the launcher has stopped Flower
        half_written = out / ".checkpoint.pt.0123456789ab.tmp"
        half_written.write_bytes(b"half a checkpoint")
        stdout, stderr = launcher.communicate(timeout=300)
    finally:
        if launcher.poll() is None:
            launcher.terminate()
            launcher.wait()
    assert launcher.returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert wait_until_gone(lambda: processes_named(FLOWER_PROCESSES)) == []
    assert not half_written.exists()
    config = RunConfig(**DEPLOYED, algorithm_options={"mu": 0.1})
    summary = json.loads((out / "summary.json").read_text())["my-fedprox+fedavgm"]  # FEDAVG's server momentum
    assert summary["lost_clients"] == {"2": [1]} and config.label == "my-fedprox+fedavgm"
    monkeypatch.setattr(FedAvgRounds, "sampled_clients", without_client(1, from_round=1))
    expected = run(config, tmp_path / "inprocess")
    deployed = torch.load(out / "model.pt")["state"]
    torch.testing.assert_close(deployed, expected.global_state, **EXACT)
    # the lost node was sent the model in round 2
    assert_rows_close(*rows_of(out, tmp_path / "inprocess"), skip=("bytes_down", "bytes_communicated"))
    without_prox = run(config.replace(algorithm_options={"mu": 0.0}))  # mu reached the nodes: it changes the result
    assert relative_distance(without_prox.global_state, expected.global_state) > 1e-3


def wait_for_train_messages(launcher, node_config: str, count: int, timeout: float) -> int:
    """Wait until the SuperNode of ``node_config`` has logged receiving ``count`` train messages; return its pid.

    A SuperNode logs to its standard output, a file that ``/proc/PID/fd/1`` opens.
    """
    deadline, pid, log = time.monotonic() + timeout, None, ""
    while time.monotonic() < deadline and launcher.poll() is None:
        if pid is None:
            nodes = [line for line in processes_named(["flower-supernode"]) if node_config in line]
            pid = int(nodes[0].split()[0]) if nodes else None
        else:
            with contextlib.suppress(OSError):
                log = Path(f"/proc/{pid}/fd/1").read_text()
            if log.count("Receiving: train message") >= count:
                return pid
        time.sleep(0.02 if pid else 0.2)
    raise AssertionError(f"no SuperNode with {node_config} received {count} train messages within {timeout} s "
                         f"(launcher status {launcher.poll()}):\n{log[-3000:]}")


def test_bad_deploy_input_is_one_error_naming_the_flag_and_starts_nothing(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cases = {
            ("--superlink-port", str(port)): f"`--superlink-port` {port} is in use on 127.0.0.1",
            ("--strategy", "allreduce", "--compression", "fp16"): "`--compression`='fp16' runs on `fedsim run`",
            ("--strategy", "fedsgd"): "--strategy",
            ("--num-supernodes", "3"): "`--num-supernodes` 3 must equal `--num-partitions` 2",
            ("--tls", str(tmp_path)): f"`--tls` {tmp_path} lacks ca.crt, server.pem, server.key",
            ("--auth",): "`--auth` needs `--tls DIR`: Flower authenticates SuperNodes over TLS only",
        }
        for extra, message in cases.items():
            result = fedsim("flower", "deploy", "--dataset", "digits", "--num-partitions", "2", *extra,
                            "--out", str(tmp_path / "out"))
            assert result.returncode == 2 and message in result.stderr, (extra, result.stderr)
            assert result.stderr.count("\n") == 1 and not (tmp_path / "out").exists()
    assert processes_named(FLOWER_PROCESSES) == []


@pytest.mark.slow
def test_with_authentication_a_supernode_whose_key_is_not_registered_is_turned_away(tmp_path):
    from fedsim.engines.flower.certificates import write_certificates, write_node_key
    from fedsim.engines.flower.federation import LocalFederation

    with LocalFederation(1, certificates=write_certificates(tmp_path / "certs"), authenticate=True) as federation:
        stranger = federation.start_supernode("stranger", 0, write_node_key(tmp_path, "stranger"))
        assert stranger.wait(timeout=120) != 0
        assert "Failed to activate SuperNode" in federation.log_path("stranger").read_text()
        deadline = time.monotonic() + 60  # the registered node joins
        while "Activated node_id" not in federation.log_path("superlink").read_text():
            assert time.monotonic() < deadline, federation.log_path("superlink").read_text()[-3000:]
            time.sleep(0.2)
        assert all(process.poll() is None for process in federation.processes if process is not stranger)
    assert wait_until_gone(lambda: processes_named(FLOWER_PROCESSES)) == []


def test_a_node_key_is_openssh_on_secp384r1_private_to_its_owner_and_never_overwritten(tmp_path):
    from fedsim.engines.flower.certificates import write_node_key

    key = write_node_key(tmp_path / "keys")
    assert key.private.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert key.public.read_text().startswith("ecdsa-sha2-nistp384 ")
    assert key.private.stat().st_mode & 0o777 == 0o600
    before = key.private.read_bytes()
    result = fedsim("flower", "node-key", str(tmp_path / "keys"))
    assert result.returncode == 2 and "already holds supernode.key, supernode.pub" in result.stderr
    assert key.private.read_bytes() == before
    assert fedsim("flower", "node-key", str(tmp_path / "keys"), "--force").returncode == 0
    assert key.private.read_bytes() != before


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
    assert from_run_config(entries) == (config, {"out": "", "resume": False, "timeout": 600.0, "grid": "",
                                                 "simulated": False})
    with pytest.raises(ValueError, match="unknown key 'rounds_total' in the Flower run config"):
        from_run_config({**entries, "rounds-total": 3})


def test_a_comparisons_samples_grid_travels_as_json_and_the_runs_own_as_empty():
    config = RunConfig(**FEDAVG)
    assert grid_entry(config, SampleGrid.from_config(config)) == grid_entry(config, None) == ""
    assert grid_from_entry("") is None
    other = SampleGrid(fraction=0.25, local_epochs=2, local_steps=None, batch_size=20, seed=3)
    assert grid_from_entry(grid_entry(config, other)) == other


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


def test_the_evaluate_handler_scores_the_global_model_on_the_nodes_own_shard(server_identity):
    from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict

    from fedsim.client import evaluate
    from fedsim.engines.flower.client_app import client_app, config_json

    config = RunConfig(**FEDAVG)
    worker = ClientWorker(config)
    rounds = worker.rounds
    state = [torch.randn_like(tensor) for tensor in rounds.global_state]
    content = RecordDict({"arrays": to_record(worker.names, state),
                          "config": ConfigRecord({"fedsim-config": config_json(config)})})
    context = Context(run_id=1, node_id=7, node_config={"partition-id": 2, "num-partitions": 4}, state=RecordDict(),
                      run_config={})
    reply = client_app()(Message(content, dst_node_id=7, message_type=MessageType.EVALUATE), context)
    metrics = reply.content["metrics"]
    shard = rounds.partition.shard(2)
    expected = evaluate(rounds.model, state, rounds.data, task=rounds.task, split="train", indices=shard)
    assert metrics["partition-id"] == 2 and metrics["num-examples"] == len(shard) == expected["num_examples"]
    assert metrics["accuracy"] == pytest.approx(expected["accuracy"]) and metrics["loss"] == pytest.approx(
        expected["loss"])


@pytest.fixture
def server_identity(monkeypatch):
    """Give this process the identity of a ServerApp of run 1, which Flower's messages are created with."""
    from flwr.supercore.task_identity import TaskIdentity

    for name in ("_run_id", "_node_id", "_task_id"):
        monkeypatch.setattr(TaskIdentity, name, 1)


class OnlineNodes:
    """The one thing a strategy asks Flower's grid outside ``Strategy.start``: which nodes are online."""

    def __init__(self, nodes):
        self.nodes = list(nodes)

    def get_node_ids(self):
        return self.nodes


@pytest.mark.numerics
def test_a_client_whose_handler_raised_is_left_out_of_the_round_and_named(server_identity, monkeypatch):
    """Client 2's node is configured for another federation, so fedsim's ClientApp raises on its train message;
    Flower's runtime answers with an error reply, and the round goes on with the others."""
    from flwr.app import ConfigRecord, Context, Error, Message, MetricRecord, RecordDict
    from flwr.common.constant import ErrorCode

    from fedsim.build import RunSetup
    from fedsim.engines.flower.client_app import client_app
    from fedsim.engines.flower.strategy import SeededFedAvg
    from fedsim.results.recorder import Recorder

    config = RunConfig(**{**FEDAVG, "fraction": 1.0, "rounds": 1})
    setup = RunSetup.build(config)
    rounds = FedAvgRounds(config, setup.model, setup.data, setup.task, setup.partition)
    recorder = Recorder(config, setup.partition)
    recorder.start()
    nodes = {client: 100 + client for client in range(4)}
    strategy = SeededFedAvg(rounds, state_names(setup.model), nodes, recorder, evaluation=None)
    messages = strategy.configure_train(1, None, ConfigRecord(), OnlineNodes(nodes.values()))
    worker = ClientWorker(config)
    replies = []
    for client, message in enumerate(messages):
        if client == 2:
            context = Context(run_id=1, node_id=nodes[2], node_config={"partition-id": 2, "num-partitions": 5},
                              state=RecordDict(), run_config={})
            with pytest.raises(ValueError, match="`num-partitions`=5 but the run has") as raised:
                client_app()(message, context)
            # what Flower's runtime sends back for a ClientApp that raised (flwr.supernode.runtime.run_clientapp)
            reason = f"{type(raised.value)}:<'{raised.value}'>"
            replies.append(Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason), reply_to=message))
            continue
        records, counts = worker.train(client, 0, message.content, RecordDict())
        replies.append(Message(RecordDict({**records, "metrics": MetricRecord(counts)}), reply_to=message))
    strategy.aggregate_train(1, reversed(replies))  # arrival order does not matter
    assert strategy.lost == {0: [2]}
    monkeypatch.setattr(FedAvgRounds, "sampled_clients", without_client(2, from_round=0))
    expected = run(config)
    torch.testing.assert_close(rounds.global_state, expected.global_state, **EXACT)


@pytest.mark.numerics
def test_simulated_nodes_are_assigned_their_clients_by_the_server_without_being_asked(server_identity):
    """On the simulation runtime the server gives partition k to the k-th smallest node id and names the client in
    each message; a node trains the client named, whatever its own node config says, and the round is fedsim's."""
    from flwr.app import ConfigRecord, Context, RecordDict

    from fedsim.build import RunSetup
    from fedsim.engines.flower.client_app import client_app
    from fedsim.engines.flower.server_app import assign_partitions
    from fedsim.engines.flower.strategy import SeededFedAvg
    from fedsim.results.recorder import Recorder

    config = RunConfig(**{**FEDAVG, "fraction": 1.0, "rounds": 1})
    grid = OnlineNodes([907, 15, 300, 42, 5000])  # one more node than partitions
    nodes = assign_partitions(grid, config, timeout_s=1.0)
    assert nodes == {0: 15, 1: 42, 2: 300, 3: 907}
    with pytest.raises(RuntimeError, match="only 5 simulated SuperNodes are connected for 6 partitions"):
        assign_partitions(grid, config.replace(num_partitions=6), timeout_s=0.0)
    setup = RunSetup.build(config)
    rounds = FedAvgRounds(config, setup.model, setup.data, setup.task, setup.partition)
    recorder = Recorder(config, setup.partition)
    recorder.start()
    strategy = SeededFedAvg(rounds, state_names(setup.model), nodes, recorder, evaluation=None)
    strategy.names_clients = True
    messages = strategy.configure_train(1, None, ConfigRecord(), grid)
    assert [(message.metadata.dst_node_id, message.content["config"]["fedsim-client"]) for message in messages] == [
        (15, 0), (42, 1), (300, 2), (907, 3)]
    # every node's own config names partition 0: the message decides
    context = Context(run_id=1, node_id=1, node_config={"partition-id": 0, "num-partitions": 4}, state=RecordDict(),
                      run_config={})
    replies = [client_app()(message, context) for message in messages]
    assert [reply.content["metrics"]["partition-id"] for reply in replies] == [0, 1, 2, 3]
    strategy.aggregate_train(1, reversed(replies))
    torch.testing.assert_close(rounds.global_state, run(config).global_state, **EXACT)


def test_the_app_folder_lists_every_setting_at_its_default_for_flwr_run():
    """``flwr run --run-config`` may set only the keys the app's pyproject lists: every field must be there."""
    import tomllib

    from fedsim.engines.flower.app_files import APP_FOLDER, default_entries

    project = tomllib.loads((APP_FOLDER / "pyproject.toml").read_text())
    assert project["tool"]["flwr"]["app"]["config"] == default_entries()
    assert project["tool"]["flwr"]["app"]["components"] == {"serverapp": "fedsim_server:app",
                                                            "clientapp": "fedsim_client:app"}
    assert {"name", "version"} <= set(project["project"]) and project["tool"]["flwr"]["app"]["publisher"]
