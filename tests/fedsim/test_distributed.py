"""The torch.distributed engine, on real gloo processes on 127.0.0.1: the same numbers as in-process.

Each test starts torchrun (or ``fedsim ddp``) as a child process with a timeout on every wait,
so that a hang fails the test instead of stalling the suite, and no process outlives it.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from fedsim.config.run_config import RunConfig
from fedsim.engines.distributed.launch import free_port, rank_environment, stop
from fedsim.engines.inprocess import run
from fedsim.processes import descendants
from fedsim.results.folder import read_rows

from .ddp_cases import sync_batchnorm_inputs
from .numerics import EXACT, assert_rows_close, relative_distance

pytestmark = [pytest.mark.slow]

CASES = Path(__file__).with_name("ddp_cases.py")
BASE = {"dataset": "digits", "model": "mlp", "num_partitions": 2, "partition": "dirichlet", "alpha": 0.3, "rounds": 1,
        "batch_size": 10, "lr": 0.1, "dtype": "float64"}
CNN = {"model": "cnn", "batch_size": 20}

# Each runs in-process and on 2 gloo processes: a round of Dir(0.3) shards of the 1,437 8x8 digits.
# Each case adds what no other case runs: the plain size and dynamic weights run inside the compressed and
# SyncBatchNorm cases, one client per rank inside the six-client ones, BatchNorm under Join inside micro-batches.
ENGINE_CASES = {
    # two rounds, each an epoch: the second shows that a rank that sat out took the others' momentum
    "allreduce, momentum, Join": {"strategy": "allreduce", "momentum": 0.5, "lr": 0.05, "rounds": 2},
    "allreduce, cycle": {"strategy": "allreduce", "uneven": "cycle", "weight_decay": 1e-3},
    "reweighted class-balanced": {"strategy": "reweighted", "weights": "class-balanced"},
    # over-selected on the simulated clock: each round keeps the 3 fastest of 5 drawn, found alike on every rank
    "fedavg, 6 clients, over-selected": {"strategy": "fedavg", "num_partitions": 6, "fraction": 0.5, "local_steps": 5,
                                         "server_momentum": 0.5, "client_speed": "lognormal:0,1", "over_select": 0.5},
    # round 2 loses clients 3 and 5, and its stragglers train 2 of the 3 epochs: drawn alike on every rank
    "fednova, FedAdam, dropouts and stragglers": {"strategy": "fednova", "num_partitions": 6, "fraction": 0.5,
                                                  "local_epochs": 3, "rounds": 2, "client_dropout": 0.3,
                                                  "stragglers": 0.5, "momentum": 0.5, "server_optimizer": "adam",
                                                  "server_lr": 0.01},
    # client-level DP: Poisson rounds of 6 clients, each rank clips its share, the noise drawn alike on both ranks
    "fedavg, client-level DP, adaptive clip": {"strategy": "fedavg", "num_partitions": 6, "fraction": 0.5,
                                               "client_sampling": "poisson", "local_steps": 3, "rounds": 2,
                                               "server_lr": 0.7, "dp_clip": 0.5, "dp_noise": 0.6,
                                               "dp_adaptive_quantile": 0.5, "dp_count_noise": 1.0},
    "allreduce, fp16 compression": {"strategy": "allreduce", "compression": "fp16"},
    "reweighted size, bf16 compression": {"strategy": "reweighted", "weights": "size", "compression": "bf16"},
    "reweighted dynamic, int8 compression": {"strategy": "reweighted", "weights": "dynamic", "compression": "int8"},
    "micro-batches under no_sync, Join": {"strategy": "allreduce", "micro_batches": 2, "batch_size": 20},
    "micro-batches, BatchNorm, dynamic": {"strategy": "reweighted", "weights": "dynamic", **CNN, "norm": "batch",
                                          "micro_batches": 3},
    "SyncBatchNorm, reweighted size, micro-batches": {"strategy": "reweighted", "weights": "size", **CNN,
                                                      "norm": "batch", "sync_bn": True, "uneven": "cycle",
                                                      "micro_batches": 2},
    # dynamic weights take their own path under SyncBatchNorm (each rank's loss weighed before its backward)
    "SyncBatchNorm, reweighted dynamic": {"strategy": "reweighted", "weights": "dynamic", **CNN, "norm": "batch",
                                          "sync_bn": True, "uneven": "cycle"},
    "float32": {"strategy": "reweighted", "weights": "size", "dtype": "float32"},
    "AMP": {"strategy": "allreduce", "dtype": "float32", "amp": True, "fused": False},
    "PowerSGD": {"strategy": "allreduce", "compression": "powersgd", **CNN},
}
FLOAT32_CASES = ("float32", "AMP")
IN_PROCESS_CASES = [name for name in ENGINE_CASES if name not in (*FLOAT32_CASES, "PowerSGD")]


def run_and_stop(command, *, timeout):
    """Run ``command``; past ``timeout``, stop it as `launch.stop` does (SIGTERM reaches torchrun's ranks) and fail."""
    process = subprocess.Popen(command, env=rank_environment(2), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(process)
        stdout, stderr = process.communicate()
        raise AssertionError(f"{command} ran past {timeout} s:\n{stderr[-3000:]}") from None
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def torchrun(args, *, nproc=2, timeout=300):
    """Run ``args`` (a script or ``-m module`` and its arguments) under torchrun on 127.0.0.1."""
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--nnodes=1",
               "--master-addr=127.0.0.1", f"--master-port={free_port()}", "--max-restarts=0", *args]
    return run_and_stop(command, timeout=timeout)


def fedsim(*args, timeout=300):
    """Run the ``fedsim`` command line in a child process."""
    return run_and_stop([sys.executable, "-m", "fedsim", *args], timeout=timeout)


@pytest.fixture(scope="module")
def distributed_finals(tmp_path_factory):
    out = tmp_path_factory.mktemp("engines")
    configs = [{**BASE, **case} for case in ENGINE_CASES.values()]
    (out / "configs.json").write_text(json.dumps(configs))
    result = torchrun([str(CASES), "engines", str(out)], timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return dict(zip(ENGINE_CASES, torch.load(out / "finals.pt")))


@pytest.mark.numerics
@pytest.mark.parametrize("case", IN_PROCESS_CASES)
def test_ddp_equals_in_process_in_float64(distributed_finals, case):
    expected = run(RunConfig(**{**BASE, **ENGINE_CASES[case]})).global_state
    torch.testing.assert_close(distributed_finals[case], expected, **EXACT)


@pytest.mark.numerics
@pytest.mark.parametrize("case", FLOAT32_CASES)
def test_ddp_equals_in_process_in_float32_by_a_norm_bound(distributed_finals, case):
    """In float32 the two engines may sum in other orders; ~100 steps keep them within 1e-4 of the norm.

    AMP (bf16 autocast) compares the in-process per-rank loop, whose forward has DDP's shapes;
    the fused forward of both ranks' samples rounds otherwise in bf16 (5% apart after a round).
    How far two bf16 kernels (a rank's one thread, this process's two) round apart is the CPU's
    choice, so AMP is held to a tenth of its own effect, as the cohorts are (test_vectorized).
    """
    config = RunConfig(**{**BASE, **ENGINE_CASES[case]})
    expected = run(config).global_state
    bound = 0.1 * relative_distance(run(config.replace(amp=False)).global_state, expected) if config.amp else 1e-4
    assert relative_distance(distributed_finals[case], expected) < bound


@pytest.mark.numerics
def test_compression_changes_the_result_that_both_engines_share(distributed_finals):
    """The compressed runs above agree across engines because both compress, not because nothing is."""
    for case in ("allreduce, fp16 compression", "reweighted dynamic, int8 compression"):
        settings = {**BASE, **ENGINE_CASES[case], "compression": "none"}
        uncompressed = run(RunConfig(**settings)).global_state
        assert relative_distance(distributed_finals[case], uncompressed) > 1e-8


def test_powersgd_trains_on_ddp_and_is_refused_in_process(distributed_finals):
    assert all(torch.isfinite(t).all() for t in distributed_finals["PowerSGD"])
    with pytest.raises(ValueError, match="powersgd.*fedsim ddp"):
        run(RunConfig(**{**BASE, **ENGINE_CASES["PowerSGD"]}))


@pytest.fixture(scope="module")
def hook_gradients(tmp_path_factory):
    out = tmp_path_factory.mktemp("hooks")
    result = torchrun([str(CASES), "hooks", str(out)])
    assert result.returncode == 0, result.stderr[-3000:]
    return [torch.load(out / f"rank{rank}.pt") for rank in (0, 1)]


@pytest.mark.numerics
@pytest.mark.parametrize("rule, expected_weights", [("equal", [0.5, 0.5]), ("size", [0.25, 0.75])])
def test_a_hook_gives_the_weighted_sum_of_the_local_gradients(hook_gradients, rule, expected_weights):
    local = [saved["local"] for saved in hook_gradients]
    by_hand = [expected_weights[0] * a + expected_weights[1] * b for a, b in zip(*local)]
    for saved in hook_gradients:  # every rank ends with the same sum
        torch.testing.assert_close(saved[rule], by_hand, rtol=1e-12, atol=1e-12)


@pytest.mark.numerics
def test_the_equal_weight_hook_equals_ddp_without_a_hook(hook_gradients):
    for saved in hook_gradients:
        torch.testing.assert_close(saved["equal"], saved["none"], rtol=1e-12, atol=1e-12)


@pytest.mark.numerics
def test_the_dynamic_hook_weighs_ranks_by_the_softmax_of_their_losses(hook_gradients):
    losses = np.array([saved["dynamic_loss"] for saved in hook_gradients])
    weights = np.exp((losses - losses.max()) / 0.5)
    weights /= weights.sum()
    local = [saved["local"] for saved in hook_gradients]
    by_hand = [weights[0] * a + weights[1] * b for a, b in zip(*local)]
    torch.testing.assert_close(hook_gradients[0]["dynamic"], by_hand, rtol=1e-12, atol=1e-12)


@pytest.mark.numerics
def test_sync_batchnorm_on_two_ranks_is_batchnorm_of_their_batches_together(tmp_path):
    """PyTorch's check of SyncBatchNorm, on gloo: 4 and 7 images against BatchNorm of the 11."""
    result = torchrun([str(CASES), "sync_batchnorm", str(tmp_path)], timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = [torch.load(tmp_path / f"rank{rank}.pt") for rank in (0, 1)]
    images, probe = sync_batchnorm_inputs()
    layer = torch.nn.BatchNorm2d(3).double()
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        layer.bias.copy_(torch.tensor([0.0, -1.0, 3.0]))
    inputs = images.clone().requires_grad_()
    output = layer(inputs)
    (output * probe).sum().backward()
    assert [ranked["type"] for ranked in saved] == ["SyncBatchNorm", "SyncBatchNorm"]
    torch.testing.assert_close(torch.cat([ranked["output"] for ranked in saved]), output.detach(), **EXACT)
    torch.testing.assert_close(torch.cat([ranked["input_grad"] for ranked in saved]), inputs.grad, **EXACT)
    for name, expected in [("weight_grad", layer.weight.grad), ("bias_grad", layer.bias.grad)]:
        torch.testing.assert_close(saved[0][name] + saved[1][name], expected, **EXACT)  # what DDP sums
    for ranked in saved:
        torch.testing.assert_close(ranked["running_mean"], layer.running_mean, **EXACT)
        torch.testing.assert_close(ranked["running_var"], layer.running_var, **EXACT)


def test_join_ends_and_divides_as_the_rule_says(tmp_path):
    """Rank i takes 3 + i steps (PyTorch's test_join.py): 3 steps of both ranks, then one of rank 1 alone.

    Each active rank's gradient is 1. The lone step adds rank 1's weight: 1/2 of DDP's default
    (divided by the initial world size), 1/2 equal, 3/4 by size [1, 3], 1/2 dynamic (its softmax
    share 1 times 1 of 2 ranks active).
    """
    result = torchrun([str(CASES), "join", str(tmp_path)], timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = {"none": -3.5, "equal": -3.5, "size": -3.75, "dynamic": -3.5}
    for rank in (0, 1):
        saved = torch.load(tmp_path / f"rank{rank}.pt")
        assert {rule: saved[rule]["steps"] for rule in expected} == dict.fromkeys(expected, 3 + rank)
        assert {rule: saved[rule]["weight"] for rule in expected} == pytest.approx(expected, abs=1e-12)


def cli_run(rounds=2):
    """Two ranks each holding back a fifth of their shard, on which rank 0 evaluates the global model."""
    return ["--strategy", "reweighted", "--weights", "size", "--model", "mlp", "--num-partitions", "2",
            "--rounds", str(rounds), "--dtype", "float64", "--local-test-fraction", "0.2", "--quiet"]


@pytest.fixture(scope="module")
def one_node_resumed(tmp_path_factory):
    """A `fedsim ddp --nproc 2` run of one round, resumed for a second: its folder and the resumed run's output."""
    folder = tmp_path_factory.mktemp("one-node") / "ddp"
    one_round = fedsim("ddp", "--nproc", "2", *cli_run(rounds=1), "--out", str(folder))
    assert one_round.returncode == 0, one_round.stderr[-3000:]
    resumed = fedsim("ddp", "--nproc", "2", *cli_run(), "--out", str(folder), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return folder, resumed.stdout


@pytest.mark.numerics
def test_fedsim_ddp_writes_the_folder_of_fedsim_run_and_resumes(one_node_resumed, tmp_path):
    ddp, output = one_node_resumed
    assert "reweighted" in output and "results in" in output
    in_process = fedsim("run", *cli_run(), "--out", str(tmp_path / "run"))
    assert in_process.returncode == 0, in_process.stderr[-3000:]
    single = tmp_path / "run"
    assert sorted(p.name for p in ddp.iterdir()) == sorted(p.name for p in single.iterdir())
    torch.testing.assert_close(torch.load(ddp / "model.pt"), torch.load(single / "model.pt"), **EXACT)
    assert_rows_close(read_rows(ddp / "metrics.csv"), read_rows(single / "metrics.csv"))
    assert_rows_close(read_rows(ddp / "clients.csv"), read_rows(single / "clients.csv"))
    assert len(read_rows(single / "clients.csv")) == 2 * 2


@pytest.mark.numerics
def test_two_launchers_on_loopback_make_the_folder_of_one(one_node_resumed, tmp_path):
    """The two-node command of the DDP tutorial, as two torchrun launchers of one process each on 127.0.0.1.

    The one-node folder was written in two starts (one round, then a resumed second): the same
    numbers show that resuming loses nothing.
    """
    port = free_port()
    launchers = []
    for node in (0, 1):
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={node}",
                   "--nproc-per-node=1", f"--rdzv-endpoint=127.0.0.1:{port}", "--max-restarts=0",
                   "-m", "fedsim", "ddp", *cli_run(), "--out", str(tmp_path / "two")]
        launchers.append(subprocess.Popen(command, env=rank_environment(2), stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
    try:
        outputs = [launcher.communicate(timeout=300) for launcher in launchers]
    finally:
        for launcher in launchers:
            stop(launcher)
    assert [launcher.returncode for launcher in launchers] == [0, 0], outputs[0][1][-2000:] + outputs[1][1][-2000:]
    one = one_node_resumed[0]
    # the ranks of the two starts may run other thread counts, so other summation orders
    torch.testing.assert_close(torch.load(tmp_path / "two" / "model.pt"), torch.load(one / "model.pt"), **EXACT)
    assert_rows_close(read_rows(tmp_path / "two" / "metrics.csv"), read_rows(one / "metrics.csv"))


def test_a_killed_rank_stops_the_run_with_an_error_that_names_it(tmp_path):
    """SIGKILL rank 1 mid-run: torchrun stops rank 0 and exits non-zero, naming rank 1, well within the timeout.

    Rank 1 dies once round 1's checkpoint is written, with 49 rounds to go: the ranks are training.
    The collectives' ``--timeout`` of 300 s is far above the bound, so the stop is torchrun's own.
    """
    out = tmp_path / "r"
    command = [sys.executable, "-m", "fedsim", "ddp", "--nproc", "2", "--strategy", "allreduce", "--model", "cnn",
               "--num-partitions", "2", "--rounds", "50", "--quiet", "--timeout", "300", "--out", str(out)]
    launcher = subprocess.Popen(command, env=rank_environment(2), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    try:
        victim = wait_for_rank(launcher.pid, rank=1, timeout=120)
        wait_for_file(out / "checkpoint.pt", launcher, timeout=120)
        started = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        _, stderr = launcher.communicate(timeout=200)
        assert time.monotonic() - started < 150
    finally:
        stop(launcher)
    assert launcher.returncode != 0
    assert "rank: 1" in stderr and "SIGKILL" in stderr, stderr[-3000:]
    assert "fedsim ddp: error: torchrun exited with status" in stderr


@pytest.mark.usefixtures("ctrl_c")
def test_ctrl_c_stops_every_rank_and_says_how_to_resume(tmp_path):
    """SIGINT to the launcher's process group, as a terminal's Ctrl-C: exit 130, a resume line, no process left."""
    out = tmp_path / "run"
    command = [sys.executable, "-m", "fedsim", "ddp", "--nproc", "2", "--strategy", "allreduce", "--model", "mlp",
               "--num-partitions", "2", "--rounds", "200", "--quiet", "--out", str(out)]
    launcher = subprocess.Popen(command, env=rank_environment(2), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    try:
        wait_for_file(out / "checkpoint.pt", launcher, timeout=120)
        os.killpg(launcher.pid, signal.SIGINT)
        _, stderr = launcher.communicate(timeout=90)
    finally:
        stop(launcher)
    assert launcher.returncode == 130, stderr[-3000:]
    assert f"continue with: fedsim ddp --nproc 2 {' '.join(command[6:])} --resume" in stderr, stderr[-3000:]
    assert torch.load(out / "checkpoint.pt", weights_only=False)["progress"]["round"] >= 1
    deadline = time.monotonic() + 30  # a rank's exit may be reaped just after the launcher's
    while processes_mentioning(str(out)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_mentioning(str(out)), "a rank outlived the launcher"


def wait_for_file(path: Path, process, timeout: float) -> None:
    """Wait until ``path`` exists while ``process`` runs; fail after ``timeout`` seconds or if it ended."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, f"the run ended (status {process.returncode}) before {path.name} was written"
        assert time.monotonic() < deadline, f"no {path.name} within {timeout} s"
        time.sleep(0.1)


def processes_mentioning(text: str) -> list[int]:
    """Return the pids whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def wait_for_rank(root: int, rank: int, timeout: float) -> int:
    """Return the pid of the process below ``root`` whose environment says ``RANK=rank``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in descendants(root):
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"RANK={rank}".encode() in environ:
                return pid
        time.sleep(0.2)
    raise AssertionError(f"no process with RANK={rank} started within {timeout} s")


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp_script.py"


def test_the_ddp_tutorial_shows_the_example_ddp_script_as_it_is():
    script = EXAMPLE.read_text()
    tutorial = EXAMPLE.parents[1].joinpath("docs", "tutorials", "ddp.md").read_text()
    assert script[script.index("import torch") :] in tutorial


@pytest.mark.numerics
def test_the_example_ddp_script_trains_under_torchrun():
    result = torchrun([str(EXAMPLE)], timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    losses = [float(line.rsplit(" ", 1)[1]) for line in result.stdout.splitlines() if line.startswith("epoch")]
    assert len(losses) == 3 and losses[-1] < losses[0]
