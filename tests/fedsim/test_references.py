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
from fedsim.config.files import read_settings
from fedsim.references import load
from fedsim.results.folder import read_rows

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


def test_a_name_a_file_lacks_is_refused_naming_the_file_as_typed_and_the_algorithms_it_holds(user_folder, capsys):
    (user_folder / "drop_largest.py").write_text(textwrap.dedent("""
        from fedsim.algorithms import Algorithm

        def largest(models):
            return max(models)

        class DropLargest(Algorithm):
            pass

        class KeepAll(Algorithm):
            pass
    """))
    with pytest.raises(SystemExit) as exit_:
        main(["run", *QUICK, "--strategy", "drop_largest.py:DropLargst", "--out", str(user_folder / "out")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err == ("fedsim run: error: `--strategy`='drop_largest.py:DropLargst': 'drop_largest.py' has no attribute "
                   "'DropLargst'; its fedsim.algorithms.Algorithm subclasses: DropLargest, KeepAll; did you mean "
                   "'DropLargest'?\n")


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


def fedsim_command(folder, *args):
    """Run the installed `fedsim` command in ``folder``; return its completed process, checked."""
    result = subprocess.run([str(Path(sys.executable).parent / "fedsim"), *args], capture_output=True, text=True,
                            cwd=folder, check=False, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def saved_model(folder):
    return torch.load(folder / "model.pt", weights_only=True)["state"]


FLOAT64 = ["--dataset", "digits", "--model", "mypkg.nets:make_net", "--num-partitions", "4", "--fraction", "0.5",
           "--rounds", "3", "--local-steps", "2", "--batch-size", "20", "--lr", "0.1", "--dtype", "float64",
           "--server-lr", "0.7", "--quiet"]


@pytest.mark.slow
@pytest.mark.numerics
def test_user_algorithms_and_model_on_flowers_simulation_equal_in_process(user_folder):
    """Every Flower process (the ServerApp, each ClientApp worker) imports the user's files and package.

    FedDyn's clients keep their g_k on their nodes and send v_k - w with their models; the
    trimmed mean combines whole models on the server. Half the clients a round, so some train twice.
    """
    from .numerics import EXACT, assert_rows_close

    strategies = f"{ROBUST}:TrimmedMean,{ROBUST.parent / 'feddyn.py'}:FedDyn"
    compared = ["compare", "--strategies", strategies, "--algorithm-option", "beta=0.25", "--algorithm-option",
                "alpha=0.1", *FLOAT64]
    fedsim_command(user_folder, *compared, "--engine", "flower", "--out", "flower")
    fedsim_command(user_folder, *compared, "--out", "inprocess")
    for name in ("trimmed-mean", "feddyn"):
        flower, inprocess = user_folder / "flower" / name, user_folder / "inprocess" / name
        torch.testing.assert_close(saved_model(flower), saved_model(inprocess), **EXACT)
        assert_rows_close(read_rows(flower / "metrics.csv"), read_rows(inprocess / "metrics.csv"))


@pytest.mark.slow
@pytest.mark.numerics
def test_a_users_model_on_fedsim_ddp_equals_in_process(user_folder):
    """torchrun's ranks import the user's package from the folder the run started in."""
    from .numerics import EXACT

    fedsim_command(user_folder, "ddp", "--nproc", "2", "--strategy", "fedprox", *FLOAT64, "--out", "ddp")
    fedsim_command(user_folder, "run", "--strategy", "fedprox", *FLOAT64, "--out", "run")
    torch.testing.assert_close(saved_model(user_folder / "ddp"), saved_model(user_folder / "run"), **EXACT)


def test_load_model_rebuilds_a_runs_final_model_even_a_users_own(user_folder):
    from fedsim import compare, load_model
    from fedsim.client import evaluate
    from fedsim.client.tasks import create_task

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


def test_a_name_registered_in_this_process_only_is_refused_where_other_processes_would_need_it():
    from fedsim.engines.flower import check_flower_config
    from fedsim.models import register_model

    @register_model("tiny-registered-here")
    def tiny(*, num_classes, in_channels, image_size, norm=None, se=False):
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(in_channels * image_size**2, num_classes))

    config = RunConfig(model="tiny-registered-here", dataset="digits", num_partitions=2)
    with pytest.raises(ValueError, match=r"`model`='tiny-registered-here' is registered in this process only, and the "
                                         r"Flower engine runs in processes that never import 'tests.fedsim.test_refer"
                                         r"ences'; name it by reference instead: `model`='tests.fedsim.test_refer"
                                         r"ences:test_a_name_registered"):
        check_flower_config(config)
    from fedsim.engines.distributed.launch import check_world_size

    with pytest.raises(ValueError, match="is registered in this process only, and fedsim ddp runs"):
        check_world_size(config, 2)


def test_a_run_is_not_resumed_with_a_file_of_code_that_changed(user_folder, capsys):
    from fedsim import run

    (user_folder / "mine.py").write_text(ROBUST.read_text())
    config = RunConfig(strategy="mine.py:Median", dataset="digits", model="mlp", num_partitions=3, rounds=1,
                       batch_size=50)
    run(config, user_folder / "r")
    main(["run", "--resume", "--out", "r", "--rounds", "2", "--quiet"])  # the same file: it goes on
    with (user_folder / "mine.py").open("a") as file:
        file.write("\n# a change\n")
    with pytest.raises(ValueError, match=r"mine.py:Median', its `strategy`, changed since the run started"):
        run(config.replace(rounds=3), user_folder / "r", resume=True)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["run", "--resume", "--out", "r", "--rounds", "3"])
    assert "its `--strategy`, changed since the run started" in capsys.readouterr().err


def test_a_settings_file_names_a_users_algorithm_and_its_options(user_folder, capsys):
    (user_folder / "study.toml").write_text(textwrap.dedent(f"""
        dataset = "digits"
        model = "mypkg.nets:make_net"
        num_partitions = 5
        rounds = 1
        batch_size = 50
        [compare]
        strategies = ["fedavg", "{ROBUST}:TrimmedMean"]
        out = "study"
        [algorithm_options]
        beta = 0.2
    """))
    main(["compare", "--config", "study.toml"])
    described = capsys.readouterr().out
    assert "trimmed-mean: C=1.0" in described and "beta=0.2" in described
    saved = RunConfig.from_mapping(read_settings(user_folder / "study" / "trimmed-mean" / "config.json"))
    assert saved.algorithm_options == {"beta": 0.2} and saved.label == "trimmed-mean"
