import json

import matplotlib.image
import pytest

from fedsim.comparison import compare
from fedsim.config import RunConfig, from_toml
from fedsim.results.folder import read_rows
from fedsim.config.strategies import SETTINGS
from partitions import Partition

from .test_cli import fedsim

QUICK = ["--model", "mlp", "--rounds", "1", "--batch-size", "20", "--num-partitions", "4", "--quiet"]


def test_compare_runs_every_strategy_on_the_same_partition_and_model(tmp_path):
    config = RunConfig(strategy="reweighted", model="mlp", rounds=2, batch_size=20, num_partitions=4,
                       weights="class-balanced")
    results = compare(config, ["allreduce", "reweighted", "fedavg"], tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary) == ["allreduce", "reweighted", "fedavg"]
    assert json.loads((tmp_path / "reweighted" / "config.json").read_text())["weights"] == "class-balanced"
    assert json.loads((tmp_path / "fedavg" / "config.json").read_text())["weights"] == "size"
    partitions = {(tmp_path / s / "partition.json").read_text() for s in summary}
    assert len(partitions) == 1
    rows = read_rows(tmp_path / "metrics.csv")
    assert sorted({row["strategy"] for row in rows}) == ["allreduce", "fedavg", "reweighted"]
    assert matplotlib.image.imread(tmp_path / "learning_curves.png").shape[1] > 500
    assert "allreduce" in (tmp_path / "comparison.txt").read_text()
    assert results["fedavg"].summary["rounds"] == 2


def test_fedsim_run_with_a_toml_config_and_flag_override(tmp_path):
    (tmp_path / "run.toml").write_text('[run]\nstrategy = "reweighted"\nweights = "dynamic"\nlr = 0.2\n')
    result = fedsim("run", "--config", str(tmp_path / "run.toml"), "--lr", "0.05", *QUICK, "--out", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    saved = json.loads((tmp_path / "r" / "config.json").read_text())
    assert (saved["strategy"], saved["weights"], saved["lr"]) == ("reweighted", "dynamic", 0.05)
    assert "final acc" in result.stdout and "reweighted" in result.stdout


def test_fedsim_compare_command_gives_fedavg_settings_to_fedavg(tmp_path):
    result = fedsim("compare", "--strategies", "allreduce,fedavg", "--fraction", "0.5", "--dtype", "float64", *QUICK,
                    "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "learning_curves.png" in result.stdout
    assert set(json.loads((tmp_path / "summary.json").read_text())) == {"allreduce", "fedavg"}
    saved = {s: json.loads((tmp_path / s / "config.json").read_text()) for s in ("allreduce", "fedavg")}
    assert (saved["allreduce"]["fraction"], saved["fedavg"]["fraction"]) == (1.0, 0.5)
    assert saved["allreduce"]["dtype"] == saved["fedavg"]["dtype"] == "float64"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--strategy", "sgd"], "argument --strategy: invalid choice: 'sgd' (choose from 'allreduce', 'fedadagrad'"),
        (["--model", "alexnet"], "argument --model: invalid choice: 'alexnet' (choose from 'cnn'"),
        (["--dataset", "imagenet"], "unknown dataset `--dataset`='imagenet'; known: cifar10"),
        (["--fraction", "1.5"], r"`--fraction` must be in (0.0, 1.0], got 1.5"),
        (["--fraction", "0"], "`--fraction` must be in (0.0, 1.0], got 0.0"),
        (["--rounds", "0"], "`--rounds` must be >= 1, got 0"),
        (["--strategy", "reweighted", "--weights", "magic"], "invalid choice: 'magic'"),
        (["--strategy", "fedavg", "--weights", "dynamic"], "`--weights`='dynamic' does not apply to `--strategy`='fedavg'"),
        (["--scheme", "pathological", "--classes-per-partition", "11"],
         "`--classes-per-partition`=11 exceeds the 10 classes"),
        (["--dtype", "float16"], "invalid choice: 'float16'"),
    ],
)
def test_bad_run_input_is_reported_before_any_output(tmp_path, args, message):
    result = fedsim("run", *QUICK, *args, "--out", str(tmp_path / "r"))
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "r").exists()


# For each strategy-specific setting: a value away from its default and a strategy that does not read it.
UNREAD = [
    (["--fraction", "0.5"], "allreduce", "`--fraction`=0.5"),
    (["--local-epochs", "2"], "reweighted", "`--local-epochs`=2"),
    (["--local-steps", "3"], "allreduce", "`--local-steps`=3"),
    (["--mu", "5"], "allreduce", "`--mu`=5.0"),
    (["--moon-mu", "5"], "scaffold", "`--moon-mu`=5.0"),
    (["--moon-temperature", "0.1"], "fedavg", "`--moon-temperature`=0.1"),
    (["--server-lr", "0.5"], "reweighted", "`--server-lr`=0.5"),
    (["--server-momentum", "0.9"], "allreduce", "`--server-momentum`=0.9"),
    (["--server-optimizer", "adam"], "reweighted", "`--server-optimizer`='adam'"),
    (["--server-beta1", "0.5"], "allreduce", "`--server-beta1`=0.5"),
    (["--server-beta2", "0.5"], "allreduce", "`--server-beta2`=0.5"),
    (["--server-tau", "0.1"], "reweighted", "`--server-tau`=0.1"),
    (["--uneven", "cycle"], "fedavg", "`--uneven`='cycle'"),
    (["--no-fused"], "moon", "`--no-fused`"),
    (["--dynamic-rule", "cosine"], "fedavg", "`--dynamic-rule`='cosine'"),
    (["--temperature", "0.5"], "allreduce", "`--temperature`=0.5"),
    (["--compression", "int8"], "fedavg", "`--compression`='int8'"),
    (["--powersgd-rank", "3"], "fedavg", "`--powersgd-rank`=3"),
    (["--sync-bn"], "fedavg", "`--sync-bn`"),
    (["--client-state-memory", "64"], "allreduce", "`--client-state-memory`=64.0"),
    (["--client-dropout", "0.2"], "reweighted", "`--client-dropout`=0.2"),
    (["--stragglers", "0.5"], "allreduce", "`--stragglers`=0.5"),
    (["--vectorize"], "allreduce", "`--vectorize`"),
    (["--vectorize-chunk", "8"], "reweighted", "`--vectorize-chunk`=8"),
    (["--client-sampling", "poisson"], "allreduce", "`--client-sampling`='poisson'"),
    (["--dp-clip", "1"], "reweighted", "`--dp-clip`=1.0"),
    (["--dp-noise", "1"], "allreduce", "`--dp-noise`=1.0"),
    (["--dp-target-epsilon", "8"], "reweighted", "`--dp-target-epsilon`=8.0"),
    (["--dp-delta", "1e-6"], "allreduce", "`--dp-delta`=1e-06"),
    (["--dp-accountant", "pld"], "reweighted", "`--dp-accountant`='pld'"),
    (["--dp-adaptive-quantile", "0.5"], "allreduce", "`--dp-adaptive-quantile`=0.5"),
    (["--dp-clip-lr", "0.1"], "reweighted", "`--dp-clip-lr`=0.1"),
    (["--dp-count-noise", "2"], "allreduce", "`--dp-count-noise`=2.0"),
    (["--client-speed", "uniform:1,2"], "reweighted", "`--client-speed`='uniform:1,2'"),
    (["--bandwidth", "constant:10"], "allreduce", "`--bandwidth`='constant:10'"),
    (["--sample-seconds", "0.01"], "reweighted", "`--sample-seconds`=0.01"),
    (["--round-deadline", "5"], "allreduce", "`--round-deadline`=5.0"),
    (["--over-select", "0.3"], "reweighted", "`--over-select`=0.3"),
    (["--asynchronous", "fedbuff"], "allreduce", "`--asynchronous`='fedbuff'"),
    (["--buffer", "4"], "reweighted", "`--buffer`=4"),
    (["--concurrency", "8"], "allreduce", "`--concurrency`=8"),
    (["--staleness", "constant"], "reweighted", "`--staleness`='constant'"),
    (["--async-alpha", "0.5"], "allreduce", "`--async-alpha`=0.5"),
]


def test_every_strategy_specific_flag_has_a_case():
    assert sorted(flag[2:].replace("no-", "").replace("-", "_") for flag, *_ in (case[0] for case in UNREAD)) == \
        sorted(SETTINGS)


@pytest.mark.parametrize("flags, strategy, named", UNREAD, ids=[case[0][0] for case in UNREAD])
def test_a_flag_the_strategy_ignores_is_refused_naming_both(tmp_path, flags, strategy, named):
    result = fedsim("run", "--strategy", strategy, *flags, "--out", str(tmp_path / "r"))
    assert result.returncode == 2 and result.stdout == ""
    assert f"{named} does nothing with `--strategy`={strategy!r}" in result.stderr
    assert "remove it or use `--strategy`=" in result.stderr


def test_dynamic_flags_name_the_weights_flag(tmp_path):
    result = fedsim("run", "--strategy", "reweighted", "--temperature", "2", "--out", str(tmp_path / "r"))
    assert result.returncode == 2
    assert "`--temperature`=2.0 does nothing with `--weights`='size'" in result.stderr
    assert "use `--weights`='dynamic'" in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--strategy", "fedavg"], "`--strategy`='fedavg' does not apply to a comparison, which runs each strategy in "
                                   "`--strategies`"),
        (["--weights", "dynamic"], "`--weights`='dynamic' does not apply to 'fedavg' in `--strategies`"),
        (["--strategies", "allreduce,reweighted", "--mu", "0.1"],
         "`--mu`=0.1 does nothing with `--strategies`='allreduce,reweighted' (it is FedAvg's FedProx weight); "
         "remove it or add 'fedavg' to `--strategies`"),
        (["--strategies", "allreduce,reweighted", "--temperature", "0.5"], "`--temperature`=0.5 does nothing"),
        (["--strategies", ","], "`--strategies` is empty"),
        (["--strategies", "allreduce,fedsgd"], "unknown strategy 'fedsgd' in `--strategies`"),
        (["--strategies", "fedavg,fedavg"], "`--strategies` names 'fedavg' twice"),
        (["--engine", "flower", "--amp"], "the Flower engine runs `--strategy`='allreduce' with `--amp` unset"),
        (["--engine", "torchrun"], "argument --engine: invalid choice: 'torchrun' (choose from 'inprocess', 'flower')"),
    ],
)
def test_bad_compare_input_is_reported_before_any_output(tmp_path, args, message):
    result = fedsim("compare", *QUICK, *args, "--out", str(tmp_path / "c"))
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == "" and not (tmp_path / "c").exists()


def test_compare_refuses_a_strategy_from_the_config_file(tmp_path):
    (tmp_path / "run.toml").write_text('strategy = "reweighted"\n')  # top-level keys reach every command
    result = fedsim("compare", "--config", str(tmp_path / "run.toml"), *QUICK, "--out", str(tmp_path / "c"))
    assert result.returncode == 2 and "`--strategies`" in result.stderr


def test_unknown_config_key_is_named(tmp_path):
    (tmp_path / "bad.toml").write_text("learning_rate = 0.1\n")
    with pytest.raises(ValueError, match="unknown key 'learning_rate'.*known keys: .*lr"):
        from_toml(tmp_path / "bad.toml")


def test_compare_rejects_bad_strategy_lists(tmp_path):
    with pytest.raises(ValueError, match="`strategies` is empty"):
        compare(RunConfig(), [], tmp_path)
    with pytest.raises(ValueError, match="names 'fedavg' twice"):
        compare(RunConfig(), ["fedavg", "fedavg"], tmp_path)
    with pytest.raises(ValueError, match="unknown strategy"):
        compare(RunConfig(), ["fedavg", "fedsgd"], tmp_path)


def test_dataset_options_reach_the_loader(tmp_path):
    result = fedsim("run", *QUICK, "--dataset", "digits", "--dataset-option", "image_size=16", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "config.json").read_text())["dataset_options"] == {"image_size": 16}
    bad = fedsim("partition", "--dataset", "digits", "--dataset-option", "size=3", "--out", str(tmp_path / "p.json"))
    assert bad.returncode == 2 and "has no option `size`; its options: image_size" in bad.stderr


def test_toml_top_level_keys_apply_under_the_run_table_and_bad_types_are_errors(tmp_path):
    (tmp_path / "mixed.toml").write_text('lr = 0.2\nmomentum = 0.5\n[run]\nstrategy = "allreduce"\nmomentum = 0.9\n'
                                         '[compare]\nlr = 0.3\n')
    config = from_toml(tmp_path / "mixed.toml")
    assert (config.strategy, config.lr, config.momentum) == ("allreduce", 0.2, 0.9)
    (tmp_path / "amp.toml").write_text('amp = "false"\n')
    with pytest.raises(TypeError, match="`amp` must be true or false"):
        from_toml(tmp_path / "amp.toml")


def test_unreadable_config_path_is_one_line(tmp_path):
    result = fedsim("run", "--config", str(tmp_path), *QUICK, "--out", str(tmp_path / "r"))
    assert result.returncode == 2 and "is a folder, not a TOML file" in result.stderr and "Traceback" not in result.stderr


def test_comparison_txt_names_the_data_model_and_partition(tmp_path):
    result = fedsim("compare", "--strategies", "fedavg,allreduce", "--dataset", "digits", "--partition", "pathological",
                    "--classes-per-partition", "3", *QUICK, "--out", str(tmp_path / "c"))
    assert result.returncode == 0, result.stderr
    title, blank, header, *_ = (tmp_path / "c" / "comparison.txt").read_text().splitlines()
    partition = Partition.load(tmp_path / "c" / "partition.json")
    assert title == f"digits, mlp, {partition.describe()}, K=4" and "3" in partition.describe()
    assert blank == "" and header.split()[:3] == ["strategy", "final", "acc"]


def test_comparison_txt_and_its_figure_show_who_is_left_behind_when_the_clients_are_measured(tmp_path):
    import re

    import numpy as np

    from fedsim.results.plots import learning_curves

    config = RunConfig(dataset="digits", model="mlp", rounds=2, batch_size=20, num_partitions=4,
                       local_test_fraction=0.2)
    results = compare(config, ["fedavg", "allreduce"], tmp_path)
    header, _, *lines = (tmp_path / "comparison.txt").read_text().splitlines()[2:]
    cells = [re.split(r"\s{2,}", line.strip()) for line in [header, *lines]]
    assert cells[0][:6] == ["strategy", "final acc", "best acc (round)", "last-5 mean acc", "clients' mean acc",
                            "worst 10% acc"]
    for row, name in zip(cells[1:], ["fedavg", "allreduce"]):
        summary = results[name].summary
        last = [client["accuracy"] for client in read_rows(tmp_path / name / "clients.csv") if client["round"] == 2]
        # 4 clients: the worst 10% is ceil(0.4) = 1 client, the worst alone
        assert len(last) == 4 and summary["final_client_acc_worst10"] == pytest.approx(min(last), abs=1e-12)
        assert row[:6] == [name, f"{summary['final_test_accuracy']:.4f}",
                           f"{summary['best_test_accuracy']:.4f} ({summary['best_round']})",
                           f"{summary['last_5_mean_test_accuracy']:.4f} (of 2)",
                           f"{summary['final_client_acc_mean']:.4f}", f"{min(last):.4f}"]
    figure = learning_curves({name: result.rows for name, result in results.items()})
    dashed = [line for line in figure.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert [line.get_label() for line in dashed] == ["fedavg: worst 10% of clients", "allreduce: worst 10% of clients"]
    for line, result in zip(dashed, results.values()):
        assert np.allclose(line.get_ydata(), [row["client_acc_worst10"] for row in result.rows], rtol=0, atol=1e-12)


def test_the_clients_columns_appear_only_for_runs_that_measured_them_and_a_diverged_run_shows_dashes():
    from fedsim.comparison import comparison_table
    from fedsim.results.outcome import RunResult

    plain = {"final_test_accuracy": 0.8, "best_test_accuracy": 0.9, "best_round": 4, "last_5_mean_test_accuracy": 0.75,
             "last_5_mean_rounds": 5, "final_test_loss": 0.5, "bytes_communicated": 2e6, "samples_seen": 100,
             "wall_s": 1.0, "rounds": 5}
    measured = {**plain, "final_client_acc_mean": 0.7, "final_client_acc_worst10": 0.25}
    diverged = {**plain, "diverged": True, "diverged_round": 3}
    assert "clients' mean acc" not in comparison_table({"a": RunResult([], plain, [])})
    header, _, *rows = comparison_table({"a": RunResult([], measured, []), "b": RunResult([], diverged, []),
                                         "c": RunResult([], plain, [])}).splitlines()
    assert "last-5 mean acc  clients' mean acc  worst 10% acc  final loss" in header
    assert rows[0].split()[1:7] == ["0.8000", "0.9000", "(4)", "0.7500", "0.7000", "0.2500"]
    assert rows[1].split()[1:9] == ["diverged", "in", "round", "3", "-", "-", "-", "-"]
    assert rows[2].split()[1:7] == ["0.8000", "0.9000", "(4)", "0.7500", "-", "-"]


#: A user's FedProx, whose own proximal weight is the option `mu` (as FedAvg's field is called).
MY_FEDPROX = '''
from fedsim.algorithms import Algorithm, Option
from fedsim.algorithms.fedprox import Proximal


class MyFedProx(Algorithm):
    options = {"mu": Option(0.01, low=0.0, help="proximal weight")}
    vectorizable = True

    def local_terms(self, client, global_state):
        return Proximal(global_state[: self.num_params], self.option("mu"))
'''


def test_a_setting_a_users_method_declares_as_its_own_option_is_refused_naming_the_option(tmp_path):
    from fedsim.config.comparison import comparison_configs

    (tmp_path / "my_fedprox.py").write_text(MY_FEDPROX)
    result = fedsim("compare", "--strategies", "fedavg,my_fedprox.py:MyFedProx", "--mu", "0.1", *QUICK,
                    "--out", "c", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""  # before the banner: nothing ran
    assert ("`--mu`=0.1 is FedAvg's FedProx weight, which 'my_fedprox.py:MyFedProx' does not read: 'fedavg' would "
            "take it while its own option mu stayed 0.01; set that option with `--algorithm-option` mu=0.1, and give "
            "`--mu` too only if 'fedavg' should take it") in result.stderr
    # the option as meant: fedavg stays fedavg; with both, each takes its own
    reference = f"{tmp_path}/my_fedprox.py:MyFedProx"
    meant = comparison_configs({"algorithm_options": {"mu": 0.1}}, ["fedavg", reference])
    assert (meant["fedavg"].label, meant[reference].algorithm_options) == ("fedavg", {"mu": 0.1})
    both = comparison_configs({"mu": 0.1, "algorithm_options": {"mu": 0.1}}, ["fedavg", reference])
    assert (both["fedavg"].label, both["fedavg"].mu, both[reference].algorithm_options) == ("fedprox", 0.1, {"mu": 0.1})
    # a single run says where the setting goes too
    alone = fedsim("run", "--strategy", "my_fedprox.py:MyFedProx", "--mu", "0.1", *QUICK, "--out", "r", cwd=tmp_path)
    assert alone.returncode == 2
    assert "MyFedProx's own option mu is set with `--algorithm-option` mu=0.1" in alone.stderr


def test_a_method_has_one_name_in_the_banner_the_table_and_the_folder(tmp_path):
    """`--mu` makes fedavg run as fedprox: the banner says so, as the table and the folder do."""
    result = fedsim("compare", "--strategies", "fedavg,scaffold", "--mu", "0.1", "--dataset", "digits", *QUICK,
                    "--out", str(tmp_path / "c"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    banner = [line.split(":")[0] for line in lines[:2]]
    table = [line.split()[0] for line in lines[lines.index("") + 3:] if line.strip()][:2]
    assert banner == table == ["fedprox", "scaffold"], result.stdout
    assert "FedProx mu=0.1" in lines[0]
    assert {path.name for path in (tmp_path / "c").iterdir() if path.is_dir()} == {"fedprox", "scaffold"}
