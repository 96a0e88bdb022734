import json

import matplotlib.image
import pytest

from fedsim.compare import compare
from fedsim.config import RunConfig
from fedsim.results import read_rows

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


def test_fedsim_compare_command(tmp_path):
    result = fedsim("compare", "--strategies", "allreduce,fedavg", *QUICK, "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "learning_curves.png" in result.stdout
    assert set(json.loads((tmp_path / "summary.json").read_text())) == {"allreduce", "fedavg"}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--strategy", "sgd"], "unknown strategy `strategy`='sgd'; known: allreduce, fedavg, reweighted"),
        (["--model", "alexnet"], "known: cnn"),
        (["--dataset", "imagenet"], "known: cifar10"),
        (["--fraction", "1.5"], r"`fraction` must be in (0.0, 1.0], got 1.5"),
        (["--fraction", "0"], "`fraction`"),
        (["--rounds", "0"], "`rounds` must be >= 1, got 0"),
        (["--strategy", "reweighted", "--weights", "magic"], "invalid choice: 'magic'"),
        (["--strategy", "fedavg", "--weights", "dynamic"], "`weights`='dynamic' does not apply"),
    ],
)
def test_bad_run_input(tmp_path, args, message):
    result = fedsim("run", *QUICK, *args, "--out", str(tmp_path / "r"))
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_config_key_is_named(tmp_path):
    (tmp_path / "bad.toml").write_text("learning_rate = 0.1\n")
    with pytest.raises(ValueError, match="unknown key 'learning_rate'.*known keys: .*lr"):
        RunConfig.from_toml(tmp_path / "bad.toml")


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


def test_toml_keys_outside_the_run_table_and_bad_types_are_errors(tmp_path):
    (tmp_path / "mixed.toml").write_text('lr = 0.2\n[run]\nstrategy = "allreduce"\n')
    with pytest.raises(ValueError, match="key 'lr' outside its \\[run\\] table"):
        RunConfig.from_toml(tmp_path / "mixed.toml")
    (tmp_path / "amp.toml").write_text('amp = "false"\n')
    with pytest.raises(TypeError, match="`amp` must be true or false"):
        RunConfig.from_toml(tmp_path / "amp.toml")


def test_unreadable_config_path_is_one_line(tmp_path):
    result = fedsim("run", "--config", str(tmp_path), *QUICK, "--out", str(tmp_path / "r"))
    assert result.returncode == 2 and "Is a directory" in result.stderr and "Traceback" not in result.stderr
