"""Clients that fail to return and stragglers that do partial work: seeded, and what the rounds do with them."""

import pytest
import torch

from fedsim.build import RunSetup
from fedsim.cli import main
from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.rounds.fedavg import FedAvgRounds
from fedsim.rounds.result import build_rounds

from .numerics import EXACT

# 8 clients, half a round, 4 local steps; float64 so that two ways of running agree to 1e-10
SYSTEM = {"dataset": "digits", "model": "mlp", "num_partitions": 8, "fraction": 0.5, "rounds": 4,
          "local_steps": 4, "batch_size": 20, "lr": 0.1, "dtype": "float64"}


def test_a_dropped_client_is_left_out_of_its_round_as_a_lost_flower_client_is(monkeypatch, tmp_path):
    config = RunConfig(**SYSTEM, client_dropout=0.4)
    rounds = build_rounds(config, RunSetup.build(config))
    dropped = {r: rounds.dropped_clients(r) for r in range(config.rounds)}
    assert sum(map(len, dropped.values())) > 0 and dropped == {r: rounds.dropped_clients(r) for r in dropped}
    assert all(set(rounds.sampled_clients(r)) | set(dropped[r]) == set(rounds.drawn_clients(r)) for r in dropped)
    result = run(config, tmp_path / "dropout")
    assert [row["dropped_clients"] for row in result.rows] == [len(dropped[r]) for r in range(config.rounds)]
    drawn = FedAvgRounds.drawn_clients
    monkeypatch.setattr(FedAvgRounds, "sampled_clients",
                        lambda self, r: [k for k in drawn(self, r) if k not in dropped[r]])
    lost = run(RunConfig(**SYSTEM))  # no dropout: the same clients go missing by other means
    torch.testing.assert_close(result.global_state, lost.global_state, **EXACT)


def test_stragglers_do_between_one_step_and_the_runs_own_drawn_per_round_and_client():
    config = RunConfig(**SYSTEM, stragglers=0.5, strategy="fednova")
    rounds = build_rounds(config, RunSetup.build(config))
    works = []
    for r in range(20):
        drawn = rounds.drawn_clients(r)
        steps = [rounds.client_training(k, r).local_steps for k in drawn]
        assert sum(step != 4 for step in steps) <= 2 and all(1 <= step <= 4 for step in steps)
        works += steps
    assert set(works) == {1, 2, 3, 4}  # every amount of partial work occurs
    unchanged = build_rounds(config.replace(stragglers=0.0), RunSetup.build(config))
    assert all(unchanged.client_training(k, 0).local_steps == 4 for k in unchanged.drawn_clients(0))


@pytest.mark.parametrize("flag, value, message", [
    ("--client-dropout", "1", "`--client-dropout` must be in [0.0, 1.0), got 1.0"),
    ("--stragglers", "1.5", "`--stragglers` must be in [0.0, 1.0], got 1.5"),
])
def test_a_dropout_that_leaves_no_client_is_one_error_naming_the_flag(tmp_path, capsys, flag, value, message):
    with pytest.raises(SystemExit):
        main(["run", "--dataset", "digits", flag, value, "--out", str(tmp_path / "r")])
    assert capsys.readouterr().err.strip() == f"fedsim run: error: {message}"


def test_allreduce_refuses_what_only_fedavgs_round_does():
    with pytest.raises(ValueError, match="`client_dropout`=0.2 does nothing with `strategy`='allreduce'"):
        RunConfig(strategy="allreduce", client_dropout=0.2)
