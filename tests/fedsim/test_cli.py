import subprocess
import sys

import matplotlib.image
import pytest

from partitions import Partition


def fedsim(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "fedsim", *args], capture_output=True, text=True, cwd=cwd, check=False)


def test_partition_mnist5k_out_of_the_box(tmp_path):
    result = fedsim(
        "partition", "--dataset", "mnist-5k", "--scheme", "dirichlet", "--alpha", "0.1", "--num-partitions", "10",
        "--seed", "3", "--out", str(tmp_path / "p.json"), "--plot", str(tmp_path / "p.png"),
    )
    assert result.returncode == 0, result.stderr
    assert "mnist-5k Dir(0.1)" in result.stdout and "Hellinger" in result.stdout
    partition = Partition.load(tmp_path / "p.json")
    assert (partition.num_partitions, partition.num_samples, partition.seed) == (10, 4000, 3)
    assert partition.params["alpha"] == 0.1
    assert matplotlib.image.imread(tmp_path / "p.png").shape[0] > 100


def test_lists_datasets_and_models():
    datasets, models = fedsim("datasets"), fedsim("models")
    assert "mnist-5k" in datasets.stdout.split() and "cifar10" in datasets.stdout.split()
    assert {"cnn", "resnet18", "vit-tiny"} <= set(models.stdout.split())


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dataset", "imagenet"], "unknown dataset `--dataset`='imagenet'; known: cifar10"),
        (["--scheme", "pathological", "--classes-per-partition", "11"],
         "`--classes-per-partition`=11 exceeds the 10 classes"),
        (["--num-partitions", "0"], "`--num-partitions` must be >= 1, got 0"),
        (["--num-partitions", "5000"], "`--num-partitions` must be between 1 and the 4000 samples, got 5000"),
        (["--min-partition-size", "450"], "`--min-partition-size`=450 is unsatisfiable"),
        (["--alpha", "-1"], "`--alpha` must be a finite number > 0, got -1.0"),
        (["--alpha", "nan"], "`--alpha` must be a finite number > 0, got nan"),
        (["--class-assignment-mode", "cyclic"], "invalid choice: 'cyclic'"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag(tmp_path, args, message):
    result = fedsim("partition", *args, "--out", str(tmp_path / "p.json"))
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 or "usage:" in result.stderr


def test_advice_names_only_flags_that_exist(tmp_path):
    result = fedsim("partition", "--alpha", "0.01", "--min-partition-size", "300", "--out", str(tmp_path / "p.json"))
    assert result.returncode == 2
    for flag in ("`--min-partition-size`=300", "`--max-tries`=10", "`--alpha`", "`--num-partitions`",
                 "turn on `--self-balancing`"):
        assert flag in result.stderr
    assert "self_balancing" not in result.stderr and "max_tries" not in result.stderr
    advised = fedsim("partition", "--self-balancing", "--max-tries", "20", "--out", str(tmp_path / "p.json"))
    assert advised.returncode == 0, advised.stderr
    assert Partition.load(tmp_path / "p.json").params["self_balancing"] is True


def test_c_equals_k_holds_every_class_by_default(tmp_path):
    result = fedsim("partition", "--scheme", "pathological", "--num-partitions", "10", "--classes-per-partition", "2",
                    "--out", str(tmp_path / "p.json"))
    assert result.returncode == 0, result.stderr
    partition = Partition.load(tmp_path / "p.json")
    assert partition.params["class_assignment_mode"] == "first-deterministic"
    assert partition.unassigned.size == 0


@pytest.mark.parametrize("args, message", [
    (["run", "--rouns", "3"], "fedsim run: error: unrecognized arguments: --rouns 3; did you mean --rounds? "
                              "(see `fedsim run --help`)"),
    (["flower", "simulate", "--rouns", "3"], "fedsim flower simulate: error: unrecognized arguments: --rouns 3; did "
                                             "you mean --rounds? (see `fedsim flower simulate --help`)"),
    (["run", "--strategy", "fedvag"], "invalid choice: 'fedvag' (choose from 'allreduce', "),
    (["run", "--strategy", "fedvag"], "; did you mean 'fedavg', 'fednova' or 'fedavgm'? (see `fedsim run --help`)"),
    (["run", "--model", "cnnn"], "; did you mean 'cnn'? (see `fedsim run --help`)"),
    (["run", "--scheme", "dirichlt"], "; did you mean 'dirichlet', "),
    # (the known names end with those other tests of this session register, so only the suggestion is matched)
    (["run", "--dataset", "mnist5k", "--out", "r"], "; did you mean 'mnist-5k', "),
    (["compare", "--strategies", "fedavg,fedvag", "--out", "c"], "unknown strategy 'fedvag' in `--strategies`; "
                                                                 "known: allreduce, "),
    (["compare", "--strategies", "fedavg,fedvag", "--out", "c"], "; did you mean 'fedavg', 'fednova' or 'fedavgm'?"),
])
def test_a_typo_names_the_commands_own_help_and_the_close_names(tmp_path, monkeypatch, capsys, args, message):
    from fedsim.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(args)
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_a_server_lr_beyond_float32_is_refused_before_the_banner_and_float64_takes_it(tmp_path):
    from fedsim.config import RunConfig

    result = fedsim("run", "--server-lr", "1e40", "--dataset", "digits", "--out", str(tmp_path / "r"))
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert result.stderr == ("fedsim run: error: `--server-lr` must be in (0.0, 3.4028234663852886e+38] with "
                             "`--dtype`='float32', got 1e+40: beyond that, float32 cannot hold a number the run "
                             "multiplies the model's tensors by\n")
    assert not (tmp_path / "r").exists()
    assert RunConfig(server_lr=1e40, dtype="float64").server_lr == 1e40  # a float64 tensor takes it
    assert RunConfig(server_lr=3e38).server_lr == 3e38
