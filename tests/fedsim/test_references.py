"""A user's strategy, model and dataset by reference, from a folder outside the repository, and each bad one."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from fedsim.cli import main
from fedsim.config.run_config import RunConfig
from fedsim.references import load

REPOSITORY = Path(__file__).resolve().parents[2]
ROBUST = REPOSITORY / "examples" / "algorithms" / "robust.py"

USER_PACKAGE = {
    "mypkg/__init__.py": "",
    "mypkg/nets.py": """
        from torch import nn

        def make_net(num_classes, in_channels, image_size):
            return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * image_size**2, num_classes))

        def raises(num_classes, in_channels, image_size):
            raise RuntimeError("no weights here")

        def not_a_model(num_classes, in_channels, image_size):
            return 3
    """,
    "mypkg/data.py": """
        import torch
        from fedsim.data import load_dataset
        from fedsim.data.dataset import Dataset

        def load(*, classes=10):
            digits = load_dataset("digits")
            keep = digits.train_labels < classes
            test = digits.test_labels < classes
            return Dataset("my-digits", digits.train_images[keep], digits.train_labels[keep],
                           digits.test_images[test], digits.test_labels[test], num_classes=classes)

        def labels_out_of_range():
            images = torch.zeros(4, 1, 8, 8, dtype=torch.uint8)
            return Dataset("bad", images, torch.tensor([0, 1, 2, 7]), images, torch.tensor([0, 1, 0, 1]), num_classes=3)

        def empty_test():
            images = torch.zeros(4, 1, 8, 8, dtype=torch.uint8)
            labels = torch.tensor([0, 1, 0, 1])
            return Dataset("bad", images, labels, images[:0], labels[:0], num_classes=2)

        def not_a_dataset():
            return {"x": 1}
    """,
    "mypkg/algos.py": """
        class NotAnAlgorithm:
            pass
    """,
    "broken.py": "import nowhere_to_be_found\n",
}


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    """A folder outside the repository with the user's package, the run's current folder."""
    folder = tmp_path / "work"
    for name, text in USER_PACKAGE.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.chdir(folder)
    monkeypatch.delenv("FEDSIM_START_FOLDER", raising=False)
    yield folder
    for module in [name for name in sys.modules if name == "mypkg" or name.startswith("mypkg.")]:
        del sys.modules[module]
    if str(folder) in sys.path:
        sys.path.remove(str(folder))


QUICK = ["--dataset", "digits", "--model", "mlp", "--num-partitions", "3", "--rounds", "1", "--batch-size", "20"]


@pytest.mark.parametrize("flag, value, message", [
    ("--strategy", "nowhere.algos:FedDyn", "`--strategy`='nowhere.algos:FedDyn': no module named 'nowhere'"),
    ("--strategy", "mypkg.algos:Missing", "'mypkg.algos' has no attribute 'Missing'"),
    ("--strategy", "mypkg.algos:NotAnAlgorithm", "is the class NotAnAlgorithm, not a subclass of "
                                                 "fedsim.algorithms.Algorithm"),
    ("--strategy", "missing.py:FedDyn", "`--strategy`='missing.py:FedDyn': no file"),
    ("--strategy", "broken.py:FedDyn", "raised ModuleNotFoundError: No module named 'nowhere_to_be_found'"),
    ("--strategy", "mypkg.algos:", "is not a reference: write package.module:Name or path/to/file.py:Name"),
    ("--model", "mypkg.nets:not_a_model", "`--model`='mypkg.nets:not_a_model' returned a int, not a torch.nn.Module"),
    ("--model", "mypkg.nets:raises", "`--model`='mypkg.nets:raises' raised RuntimeError: no weights here"),
    ("--dataset", "mypkg.data:labels_out_of_range", "`train_labels` must lie in [0, 3), got [0, 7]"),
    ("--dataset", "mypkg.data:empty_test", "`test_images` is empty"),
    ("--dataset", "mypkg.data:not_a_dataset", "returned a dict, not a fedsim.data.Dataset"),
])
def test_a_bad_reference_is_one_line_naming_its_flag_before_any_output(user_folder, capsys, flag, value, message):
    args = ["run", *QUICK, flag, value, "--out", str(user_folder / "out")]
    with pytest.raises(SystemExit) as exit_:
        main(args)
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and out == ""
    assert err.startswith("fedsim run: error: ") and flag in err and message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (user_folder / "out").exists()


def test_a_file_reference_is_stored_absolute_and_resolves_to_one_class_from_any_folder(user_folder, monkeypatch):
    relative = f"{os.path.relpath(ROBUST, user_folder)}:Median"
    config = RunConfig(strategy=relative)
    assert config.strategy == f"{ROBUST}:Median" and config.label == "median"
    monkeypatch.chdir(REPOSITORY)  # another process, started elsewhere, reads the config's absolute path
    assert RunConfig.from_mapping(config.to_dict()) == config
    assert load(config.strategy, "strategy") is load(config.strategy, "strategy")


def test_user_code_runs_with_fedsims_own_command_from_a_folder_outside_the_repository(user_folder):
    """`fedsim` (the installed command, which does not put the current folder on sys.path) finds the user's package."""
    command = Path(sys.executable).parent / "fedsim"
    robust = str(ROBUST)
    result = subprocess.run(
        [str(command), "compare", "--strategies", f"fedavg,{robust}:TrimmedMean", "--algorithm-option", "beta=0.2",
         "--dataset", "mypkg.data:load", "--dataset-option", "classes=5", "--model", "mypkg.nets:make_net",
         "--num-partitions", "5", "--rounds", "2", "--batch-size", "20", "--out", "cmp"],
        capture_output=True, text=True, cwd=user_folder, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "trimmed-mean" in result.stdout and "beta=0.2" in result.stdout
    assert sorted(path.name for path in (user_folder / "cmp").iterdir() if path.is_dir()) == ["fedavg", "trimmed-mean"]
    resumed = subprocess.run([str(command), "compare", "--out", "cmp", "--resume", "--rounds", "3"],
                             capture_output=True, text=True, cwd=user_folder, check=False, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "trimmed-mean" in resumed.stdout


def test_a_model_and_a_dataset_by_reference_build_as_registered_ones_do(user_folder):
    config = RunConfig(strategy="fedavg", dataset="mypkg.data:load", model="mypkg.nets:make_net",
                       dataset_options={"classes": 4}, num_partitions=2)
    data = config.load_dataset()
    assert data.num_classes == 4 and int(data.train_labels.max()) == 3
    from fedsim.build import build_model

    model = build_model(config, data)
    assert isinstance(model, torch.nn.Sequential) and model[1].out_features == 4


@pytest.mark.slow
@pytest.mark.numerics
def test_user_algorithms_and_model_on_flowers_simulation_equal_in_process(user_folder):
    """Every Flower process (the ServerApp, each ClientApp worker) imports the user's files and package.

    FedDyn's clients keep their g_k on their nodes and send v_k - w with their models; the
    trimmed mean combines whole models on the server. Half the clients a round, so some train twice.
    """
    from fedsim.comparison import compare
    from fedsim.config.comparison import comparison_configs

    from .numerics import EXACT, assert_rows_close

    strategies = [f"{ROBUST}:TrimmedMean", f"{ROBUST.parent / 'feddyn.py'}:FedDyn"]
    settings = {"dataset": "digits", "model": "mypkg.nets:make_net", "num_partitions": 4, "fraction": 0.5,
                "rounds": 3, "local_steps": 2, "batch_size": 20, "lr": 0.1, "dtype": "float64", "server_lr": 0.7,
                "algorithm_options": {"beta": 0.25, "alpha": 0.1}}
    configs = comparison_configs(settings, strategies)
    assert [config.algorithm_options for config in configs.values()] == [{"beta": 0.25}, {"alpha": 0.1}]
    shared = next(iter(configs.values()))
    flower = compare(shared, strategies, user_folder / "flower", configs=configs, engine="flower", quiet=True)
    expected = compare(shared, strategies, user_folder / "inprocess", configs=configs, quiet=True)
    assert list(flower) == list(expected) == ["trimmed-mean", "feddyn"]
    for name in expected:
        torch.testing.assert_close(flower[name].global_state, expected[name].global_state, **EXACT)
        assert_rows_close(flower[name].rows, expected[name].rows, skip=("wall_s", "eval_s"))


def test_load_model_rebuilds_a_runs_final_model_even_a_users_own(user_folder):
    from fedsim import compare, load_model
    from fedsim.client import evaluate
    from fedsim.tasks import create_task

    config = RunConfig(dataset="digits", model="mypkg.nets:make_net", num_partitions=3, rounds=2, batch_size=20)
    results = compare(config, ["fedavg", "fedadam"], user_folder / "cmp", quiet=True)
    model = load_model(user_folder / "cmp" / "fedadam")
    assert isinstance(model, torch.nn.Sequential) and not model.training
    data = config.load_dataset()
    accuracy = evaluate(model, None, data, task=create_task(data.num_classes))["accuracy"]
    assert accuracy == pytest.approx(results["fedadam"].summary["final_test_accuracy"], abs=1e-6)
    with pytest.raises(ValueError, match="it compares fedadam, fedavg; load one, e.g."):
        load_model(user_folder / "cmp")


def test_an_error_raised_in_python_speaks_python_and_the_same_check_speaks_flags_on_the_command_line(tmp_path,
                                                                                                       capsys):
    from fedsim import run

    config = RunConfig(dataset="digits", model="mlp", num_partitions=2, rounds=1, batch_size=50)
    run(config, tmp_path / "r")
    with pytest.raises(ValueError, match=r"already holds a run; pass `resume`=True to continue it, or choose "
                                         r"another `out`$"):
        run(config, tmp_path / "r")
    with pytest.raises(SystemExit):
        main(["run", "--dataset", "digits", "--model", "mlp", "--num-partitions", "2", "--rounds", "1",
              "--batch-size", "50", "--out", str(tmp_path / "r")])
    assert "already holds a run; pass `--resume` to continue it, or choose another `--out`" in capsys.readouterr().err
