"""Clients that fail to return and stragglers that do partial work: seeded, and what the rounds do with them."""

import numpy as np
import pytest

from fedsim.build import RunSetup
from fedsim.cli import main
from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.engines.inprocess.fedavg import InProcessFedAvgRounds
from fedsim.engines.inprocess.gradient import InProcessGradientRounds
from fedsim.rounds.fedavg import FedAvgRounds
from fedsim.rounds.result import build_rounds
from fedsim.seeding import Stream, derive_seed

# 8 clients, half of them a round, 4 local steps
SYSTEM = {"dataset": "digits", "model": "mlp", "num_partitions": 8, "fraction": 0.5, "rounds": 4,
          "local_steps": 4, "batch_size": 20, "lr": 0.1, "dtype": "float64"}
DROPOUT = 0.4


def lost_by_rule(seed, round_index, drawn, chance):
    """The clients of ``drawn`` that fail to return, by the documented rule, drawn here from the stream itself.

    Each drawn client, in the order drawn, takes one uniform draw from the round's
    ``Stream.CLIENT_LOSS`` stream, and fails to return when its draw falls below ``chance``.
    """
    draws = np.random.default_rng(derive_seed(seed, Stream.CLIENT_LOSS, round_index)).random(len(drawn))
    return [client for client, draw in zip(drawn, draws) if draw < chance]


def test_a_drawn_client_fails_to_return_when_its_seeded_draw_of_the_round_is_below_the_dropout():
    config = RunConfig(**SYSTEM, client_dropout=DROPOUT)
    rounds = build_rounds(config, RunSetup.build(config))  # as Flower's server and nodes build them
    order = [3, 0, 2, 1, 0]  # asked out of order and twice: each round's draw stands alone
    dropped = [rounds.dropped_clients(r) for r in order]
    assert dropped == [lost_by_rule(config.seed, r, rounds.drawn_clients(r), DROPOUT) for r in order]
    assert dropped[1] == dropped[4] and any(dropped)
    in_process = build_rounds(config, RunSetup.build(config), fedavg=InProcessFedAvgRounds,
                              gradient=InProcessGradientRounds)
    assert [in_process.dropped_clients(r) for r in order] == dropped
    assert all(set(rounds.sampled_clients(r)) == set(rounds.drawn_clients(r)) - set(rounds.dropped_clients(r))
               for r in range(config.rounds))
    assert build_rounds(config.replace(client_dropout=0.0), RunSetup.build(config)).dropped_clients(0) == []


def test_the_dropout_loses_its_share_of_clients_independently_in_each_round_and_client():
    """Every client drawn in every one of 500 rounds: 4,000 draws of chance 0.4 (expected 1,600, std 31)."""
    config = RunConfig(**{**SYSTEM, "fraction": 1.0}, client_dropout=DROPOUT)
    rounds = build_rounds(config, RunSetup.build(config))
    assert rounds.drawn_clients(0) == list(range(8))  # the same clients every round: only the round can vary
    dropped = [rounds.dropped_clients(r) for r in range(500)]
    assert 1600 - 5 * 31 < sum(map(len, dropped)) < 1600 + 5 * 31
    per_client = np.bincount([client for lost in dropped for client in lost], minlength=8)
    assert np.all(np.abs(per_client - 200) < 5 * 11), per_client  # no client is lost more than another
    counts = [len(lost) for lost in dropped]
    assert min(counts) == 0 and max(counts) >= 6  # each client is a draw of its own, not a fixed count a round
    assert len({tuple(lost) for lost in dropped}) > 100  # of the 256 subsets: a new draw every round
    other_seed = build_rounds(config.replace(seed=1), RunSetup.build(config))
    assert [other_seed.dropped_clients(r) for r in range(20)] != dropped[:20]


def test_a_dropped_client_is_left_out_of_its_round_and_the_others_share_its_weight(monkeypatch, tmp_path):
    config = RunConfig(**SYSTEM, client_dropout=DROPOUT)
    setup = RunSetup.build(config)
    rounds = build_rounds(config, setup)
    drawn = {r: rounds.drawn_clients(r) for r in range(config.rounds)}
    served, serve = {}, FedAvgRounds.served

    def noting_served(self, round_index, assignments):
        served[round_index] = list(assignments)
        return serve(self, round_index, assignments)

    monkeypatch.setattr(FedAvgRounds, "served", noting_served)  # watched, unchanged
    rows = run(config, tmp_path / "dropout").rows
    sizes = setup.partition.sizes
    for r in range(config.rounds):
        lost = lost_by_rule(config.seed, r, drawn[r], DROPOUT)
        kept = [client for client in drawn[r] if client not in lost]
        assert [client for client, _ in served.get(r, [])] == kept, r  # a round that loses all trains nobody
        assert [weight for _, weight in served.get(r, [])] == pytest.approx(
            [sizes[k] / sum(sizes[j] for j in kept) for k in kept], rel=1e-12), r
        assert rows[r]["round"] == r + 1 and rows[r]["dropped_clients"] == len(lost), r
    assert served and sum(row["dropped_clients"] for row in rows) > 0  # some clients train, and some are lost


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
