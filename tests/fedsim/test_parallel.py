"""`fedsim run --workers N`: a round's clients trained in forked processes, the result of one process."""

import multiprocessing
import os

import pytest
import torch

from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.rounds.fedavg import FedAvgRounds

from .numerics import EXACT, assert_rows_close
from .test_cli_settings import QUICK, error_line
from .test_cli import fedsim

CASES = {
    "fedavg, momentum, FedAvgM": {"strategy": "fedavg", "momentum": 0.5, "server_momentum": 0.5},
    "fednova, uneven steps, FedAdam": {"strategy": "fednova", "local_epochs": 2, "server_optimizer": "adam",
                                       "server_lr": 0.01},
}
# 7 clients, 5 a round: the workers' shares differ in size, and some clients train in two rounds
SETTINGS = {"dataset": "digits", "model": "mlp", "dtype": "float64", "num_partitions": 7, "fraction": 0.7,
            "partition": "dirichlet", "alpha": 0.5, "rounds": 3, "batch_size": 16, "lr": 0.05}


@pytest.mark.numerics
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("workers", [2, 3])
def test_clients_on_workers_end_where_one_process_ends_in_float64(tmp_path, case, workers):
    config = RunConfig(**SETTINGS, **CASES[case])
    parallel = run(config, tmp_path / "parallel", workers=workers)
    assert multiprocessing.active_children() == []
    expected = run(config, tmp_path / "one")
    torch.testing.assert_close(parallel.global_state, expected.global_state, **EXACT)
    assert_rows_close(parallel.rows, expected.rows)  # 1-thread workers sum in another order


def fail_in_worker(how):
    """Return a `FedAvgRounds.train_client` that fails in a forked worker only (never in the run's process)."""
    parent, original = os.getpid(), FedAvgRounds.train_client

    def train_client(self, client, round_index):
        if os.getpid() != parent and round_index == 1:  # the second round
            if how == "exit":
                os._exit(3)
            raise ValueError(f"client {client} cannot train")
        return original(self, client, round_index)

    return train_client


@pytest.mark.parametrize("how, message", [
    ("exit", r"client worker 1 \(pid \d+\) exited with status 3 during round 2"),
    ("raise", r"client worker 1 failed in round 2: ValueError: client \d+ cannot train"),
])
def test_a_worker_that_dies_or_fails_stops_the_run_with_an_error_naming_it(tmp_path, monkeypatch, how, message):
    monkeypatch.setattr(FedAvgRounds, "train_client", fail_in_worker(how))
    looped = RunConfig(**SETTINGS, vectorize=False)  # each client through `train_client`
    with pytest.raises(RuntimeError, match=message):
        run(looped, tmp_path / "run", workers=2)
    assert multiprocessing.active_children() == []
    monkeypatch.undo()  # the checkpoint of round 0 resumes, in one process or on workers
    resumed = run(looped, tmp_path / "run", resume=True, workers=2)
    assert [row["round"] for row in resumed.rows] == [1, 2, 3]


@pytest.mark.parametrize("flags, message", [
    (["--workers", "0"], "`--workers` must be a whole number in 1..256, got 0"),
    (["--workers", "2", "--strategy", "scaffold"], "`--strategy`='scaffold' keeps a state on each client between "
                                                   "rounds: leave `--workers` out"),
    (["--workers", "2", "--strategy", "allreduce"], "`--workers`=2 trains FedAvg's clients in parallel"),
])
def test_bad_workers_are_one_error_naming_the_flag(tmp_path, flags, message):
    assert message in error_line(fedsim("run", *QUICK, *flags, "--out", str(tmp_path / "r")))
    assert not (tmp_path / "r").exists()


LAGGED_ANCHOR = '''
import torch

from fedsim.algorithms import Algorithm, ServerState
from fedsim.algorithms.fedprox import Proximal


class LaggedAnchor(Algorithm):
    """FedProx's pull towards the global model of the round before (zero in round 0): a broadcast server state."""

    name = "lagged-anchor"

    def __init__(self, config, model, global_state):
        super().__init__(config, model, global_state)
        self.global_state = global_state
        self.anchor = ServerState(global_state[: self.num_params], broadcast=True)
        self.next_anchor = ServerState(global_state[: self.num_params])

    def local_terms(self, client, global_state):
        return Proximal(list(self.anchor), 0.5)

    def end_round(self):
        with torch.no_grad():
            torch._foreach_copy_(self.anchor, list(self.next_anchor))
            torch._foreach_copy_(self.next_anchor, self.global_state[: self.num_params])
'''


@pytest.mark.numerics
def test_workers_take_the_servers_broadcast_state_of_each_round(tmp_path):
    """A forked worker's copy of a method's broadcast state would stay the round-0 one: the server sends it."""
    (tmp_path / "lagged.py").write_text(LAGGED_ANCHOR)
    config = RunConfig(**SETTINGS, strategy=f"{tmp_path}/lagged.py:LaggedAnchor")
    torch.testing.assert_close(run(config, workers=2).global_state, run(config).global_state, **EXACT)
