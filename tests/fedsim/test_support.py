"""`fedsim strategies`: the table of what runs where, held cell by cell.

Each "no" is refused by the engine itself, before it starts anything, with the table's reason;
each "yes" of the in-process columns and of ``fedsim ddp`` runs one round there. Two of the
user's methods in ``examples/algorithms`` (FedDyn's clients keep a state; the median is not a
weighted sum) stand for the declarations no built-in makes.
"""

import json
import math
from pathlib import Path

import pytest

from fedsim.cli.commands import main
from fedsim.cli.flag_messages import flag_message
from fedsim.config.run_config import RunConfig
from fedsim.config.strategies import get_strategy, list_strategies
from fedsim.engines.distributed.launch import check_world_size
from fedsim.engines.flower import check_flower_config
from fedsim.engines.inprocess import run
from fedsim.references import shown
from fedsim.support import ENGINES, format_support_table, refusal, support_table

from .test_distributed import CASES, torchrun

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "algorithms"
USER_METHODS = [f"{EXAMPLES / 'feddyn.py'}:FedDyn", f"{EXAMPLES / 'robust.py'}:Median"]
TABLE = support_table([*list_strategies(), *USER_METHODS])
# each cell's reason in the library's words, as the engines' errors read
CELLS = {(cell.strategy, cell.engine): None if cell.reason is None else str(cell.reason) for row in TABLE for cell in row}
# 2 clients of the 8x8 digits, one round: one shard per rank for allreduce and reweighted under ddp
ONE_ROUND = {"dataset": "digits", "model": "mlp", "num_partitions": 2, "rounds": 1, "batch_size": 64, "lr": 0.05}


def one_round(strategy: str, **settings) -> RunConfig:
    """The one-round config of ``strategy``, two local steps where it trains locally."""
    local = {"local_steps": 2} if get_strategy(strategy).local_training else {}
    return RunConfig(strategy=strategy, **ONE_ROUND, **local, **settings)


def cells(engine: str, runs: bool) -> list[str]:
    """The strategies whose cell of ``engine`` says yes (``runs``), or no."""
    return [strategy for (strategy, where), reason in CELLS.items() if where == engine and (reason is None) == runs]


def short(strategy: str) -> str:
    return strategy.rsplit("/", 1)[-1]


def test_the_table_has_a_row_for_every_strategy_and_a_cell_for_every_engine():
    assert [row[0].strategy for row in TABLE] == [*list_strategies(), *USER_METHODS]
    assert all([cell.engine for cell in row] == list(ENGINES) for row in TABLE)
    # what the class declares decides, whatever the name
    assert CELLS["scaffold", "workers"] and CELLS["moon", "ddp"] and CELLS[USER_METHODS[1], "ddp"]
    assert CELLS["fednova", "ddp"] is None and CELLS["allreduce", "ddp"] is None
    assert all(CELLS[strategy, "inprocess"] is None for strategy, _ in CELLS)


def test_fedsim_strategies_prints_every_cell_and_numbers_each_reason(capsys):
    assert main(["strategies", USER_METHODS[0]]) == 0
    printed = capsys.readouterr().out
    table = support_table([*list_strategies(), USER_METHODS[0]])
    assert printed.startswith(format_support_table(table, wording=flag_message))
    header, _, *rows = printed.split("\n\n")[0].splitlines()
    assert header.split()[:3] == ["strategy", "in-process", "--workers"] and len(rows) == len(list_strategies()) + 1
    feddyn = rows[-1].split()
    assert feddyn[0] == shown(USER_METHODS[0]) and feddyn[1] == "yes" and feddyn[2] == "no"
    number = feddyn[3].strip("()")
    assert f"({number}) `--strategy`={USER_METHODS[0]!r} keeps a state on each client between rounds" in printed


@pytest.mark.parametrize("strategy", cells("workers", runs=False), ids=short)
def test_each_no_of_the_workers_column_is_refused_by_the_engine_with_its_reason(strategy):
    with pytest.raises(ValueError) as refused:
        run(one_round(strategy), workers=2)
    assert str(refused.value) == CELLS[strategy, "workers"]


@pytest.mark.parametrize("strategy", cells("cohorts", runs=False), ids=short)
def test_each_no_of_the_cohorts_column_is_refused_with_its_reason(strategy):
    with pytest.raises(ValueError) as refused:  # a gradient strategy's config, else the engine, refuses it
        run(one_round(strategy, vectorize=True))
    assert str(refused.value) == CELLS[strategy, "cohorts"]


@pytest.mark.parametrize("strategy", cells("ddp", runs=False), ids=short)
def test_each_no_of_the_ddp_column_is_refused_by_the_launcher_and_by_each_rank_with_its_reason(strategy):
    for in_rank in (False, True):
        with pytest.raises(ValueError) as refused:
            check_world_size(one_round(strategy), 2, in_rank=in_rank)
        assert str(refused.value) == CELLS[strategy, "ddp"]


def test_the_flower_columns_refuse_no_round_method_and_their_settings_refusals_come_from_the_same_function():
    # the asynchronous servers alone: Flower's takes replies in wall-clock order, not the simulated clock's
    assert cells("flower-simulation", runs=False) == cells("flower-deployment", runs=False) == ["fedasync", "fedbuff"]
    stateful = one_round("scaffold")
    for deployment, engine in ((False, "flower-simulation"), (True, "flower-deployment")):
        check_flower_config(stateful, deployment=deployment)
        with pytest.raises(ValueError) as refused:
            check_flower_config(stateful, resume=True, deployment=deployment)
        assert str(refused.value) == str(refusal(stateful, engine, resume=True))
        assert "keeps each client's state on its Flower node" in str(refused.value)


def test_ddp_settings_refusals_name_what_to_change():
    dynamic = one_round("reweighted", weights="dynamic", dynamic_rule="cosine")
    with pytest.raises(ValueError, match="`dynamic_rule`='cosine' needs every rank's whole gradient"):
        check_world_size(dynamic, 2, in_rank=True)
    with pytest.raises(ValueError, match=r"`num_partitions`=2 must equal the number of processes \(3\)"):
        check_world_size(one_round("allreduce"), 3)
    assert refusal(one_round("fedavg"), "ddp", nproc=3) is None  # fedavg serves any number of clients


def finite_loss(result) -> bool:
    return len(result.rows) == 1 and math.isfinite(result.rows[0]["train_loss"])


@pytest.mark.parametrize("strategy", cells("inprocess", runs=True), ids=short)
def test_each_yes_of_the_in_process_column_runs_a_round(strategy):
    assert finite_loss(run(one_round(strategy)))


@pytest.mark.parametrize("strategy", cells("workers", runs=True), ids=short)
def test_each_yes_of_the_workers_column_runs_a_round_on_two_processes(strategy):
    assert finite_loss(run(one_round(strategy), workers=2))


@pytest.mark.parametrize("strategy", cells("cohorts", runs=True), ids=short)
def test_each_yes_of_the_cohorts_column_trains_its_clients_as_a_cohort(strategy):
    result = run(one_round(strategy, vectorize=True))
    assert finite_loss(result) and result.summary["client_training"].startswith("vectorized")


@pytest.mark.slow
def test_each_yes_of_the_ddp_column_runs_a_round_on_two_ranks(tmp_path):
    strategies = cells("ddp", runs=True)
    configs = [one_round(strategy).to_dict() for strategy in strategies]
    (tmp_path / "configs.json").write_text(json.dumps(configs))
    result = torchrun([str(CASES), "engines", str(tmp_path)], timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    import torch

    finals = torch.load(tmp_path / "finals.pt")
    assert len(finals) == len(strategies)
    assert all(torch.isfinite(tensor).all() for final in finals for tensor in final)


#: The Flower simulation's "yes" cells that no other test runs there (test_flower.py runs fedavg with server momentum,
#: allreduce, reweighted and scaffold with FedAdam; test_references.py FedDyn and a trimmed mean, which is not a
#: weighted sum as the median is not): each run here, the server optimizers of fedadagrad and fedyogi on them.
FLOWER_RUNS = {"fednova": "yogi", "moon": "yogi", "fedprox": "adagrad"}


@pytest.mark.slow
def test_each_yes_of_the_flower_simulation_column_runs_on_flower(tmp_path):
    from fedsim.comparison import compare

    ran = {"fedavg", "fedavgm", "allreduce", "reweighted", "scaffold", "fedadam", *USER_METHODS}
    new = {*FLOWER_RUNS, *(f"fed{optimizer}" for optimizer in FLOWER_RUNS.values())}
    assert set(cells("flower-simulation", runs=True)) == ran | new  # a new "yes" needs a run here
    for strategy, optimizer in FLOWER_RUNS.items():
        config = one_round(strategy, server_optimizer=optimizer, server_lr=0.01)
        results = compare(config, [strategy], tmp_path / strategy, engine="flower")
        assert list(results) == [f"{strategy}+fed{optimizer}"] and finite_loss(results[config.label])


def test_the_readmes_summary_of_the_table_is_what_support_says():
    readme = (EXAMPLES.parents[1] / "README.md").read_text()
    section = readme[readme.index("## What runs where"):]
    section = section[: section.index("\n## ")]
    rows = [[cell.strip().strip("`") for cell in line.strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| ")]
    header, rows = rows[0], rows[1:]
    columns = {engine.column: name for name, engine in ENGINES.items()}
    assert len(rows) >= 5 and all(column in columns for column in header[1:]), header
    for names, *shown in rows:
        for strategy in names.split(", "):
            row = {cell.engine: cell for cell in support_table([strategy])[0]}
            said = ["yes" if row[columns[column]].reason is None else "no" for column in header[1:]]
            assert said == shown, (strategy, dict(zip(header[1:], said)))
