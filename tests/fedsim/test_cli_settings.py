"""Settings are used or refused, errors speak in the user's flags and files, the help says what each flag means."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fedsim import cli
from fedsim.config.field_docs import FIELD_DOCS
from fedsim.config.run_config import RunConfig
from partitions import Partition

from .test_cli import fedsim

QUICK = ["--model", "mlp", "--rounds", "1", "--batch-size", "20", "--num-partitions", "4", "--quiet"]


def error_line(result) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "", "nothing may be printed before the error"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--partition", "iid", "--alpha", "0.1"], "`--alpha`=0.1 does nothing with `--partition`='iid'"),
        (["--partition", "dirichlet", "--shards-per-partition", "3"], "`--shards-per-partition`=3 does nothing"),
        (["--strategy", "allreduce", "--mu", "5"], "`--mu`=5.0 does nothing with `--strategy`='allreduce'"),
        (["--strategy", "allreduce", "--local-epochs", "2"], "`--local-epochs`=2 does nothing"),
        (["--dataset-option", "root=/tmp"], "`--dataset-option` may not set 'root': it is the setting `--data-root`"),
        (["--dtype", "float64", "--amp"], "`--amp` computes in bfloat16/float16"),
        (["--strategy", "scaffold", "--no-fused"], "`--no-fused` does nothing with `--strategy`='scaffold'"),
        (["--alpha", "nan"], "`--alpha` must be a finite number > 0, got nan"),
    ],
)
def test_settings_a_run_would_ignore_are_refused_in_flags(tmp_path, flags, message):
    assert message in error_line(fedsim("run", *QUICK, *flags, "--out", str(tmp_path / "r")))
    assert not (tmp_path / "r").exists()


def test_a_bad_value_in_the_toml_file_is_named_by_file_and_line_even_when_a_flag_overrides_it(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('[run]\nstrategy = "fedavg"\nlr = -1\n')
    line = error_line(fedsim("run", "--config", str(toml), "--lr", "0.1", *QUICK, "--out", str(tmp_path / "r")))
    assert f"{toml}, line 3:" in line and "`--lr` must be a finite number > 0, got -1" in line


@pytest.mark.parametrize(
    "content, message",
    [
        (b'[run]\nmodel = "\xff"\n', "is not UTF-8 text"),
        (b"[run]\ndata_root = 5\n", "line 2: `--data-root` must be a folder path (text), got 5"),
        (b"[run]\nrounds = \n", "is not valid TOML"),
    ],
)
def test_a_broken_toml_file_is_named(tmp_path, content, message):
    toml = tmp_path / "run.toml"
    toml.write_bytes(content)
    line = error_line(fedsim("run", "--config", str(toml), *QUICK, "--out", str(tmp_path / "r")))
    assert str(toml) in line and message in line


def test_a_corrupt_config_json_in_a_run_folder_is_named(tmp_path):
    out = tmp_path / "r"
    assert fedsim("run", *QUICK, "--out", str(out)).returncode == 0
    (out / "config.json").write_text("{not json")
    line = error_line(fedsim("run", *QUICK, "--out", str(out), "--resume"))
    assert f"{out / 'config.json'} is damaged" in line


def test_a_saved_partition_is_used_and_checked_against_the_dataset(tmp_path):
    saved = tmp_path / "p.json"
    assert fedsim("partition", "--scheme", "iid", "--num-partitions", "4", "--out", str(saved)).returncode == 0
    result = fedsim("run", *[a for a in QUICK if a not in ("--num-partitions", "4")], "--partition-file", str(saved),
                    "--out", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    assert Partition.load(tmp_path / "r" / "partition.json") == Partition.load(saved)
    assert json.loads((tmp_path / "r" / "config.json").read_text())["partition_file"] == str(saved)
    other = fedsim("run", *QUICK, "--dataset", "digits", "--partition-file", str(saved), "--out", str(tmp_path / "d"))
    assert "`--partition-file`" in error_line(other) and "partitions 4000 samples" in error_line(other)
    with_alpha = fedsim("run", *QUICK, "--partition-file", str(saved), "--alpha", "0.1", "--out", str(tmp_path / "a"))
    assert "`--alpha`=0.1 does nothing with `--partition-file`" in error_line(with_alpha)
    five = [arg if arg != "4" else "5" for arg in QUICK]
    more = fedsim("run", *five, "--partition-file", str(saved), "--out", str(tmp_path / "m"))
    assert "holds 4 partitions but `--num-partitions` is 5" in error_line(more)


def test_partition_refuses_to_overwrite_unless_forced_and_checks_the_plot_path_first(tmp_path):
    out = tmp_path / "p.json"
    base = ["partition", "--scheme", "iid", "--num-partitions", "4", "--out", str(out)]
    assert fedsim(*base).returncode == 0
    before = out.read_text()
    assert "`--out`" in error_line(fedsim(*base, "--seed", "1")) and out.read_text() == before
    assert fedsim(*base, "--seed", "1", "--force").returncode == 0 and out.read_text() != before
    out.unlink()
    (tmp_path / "a_file").write_text("x")
    for plot, message in [(tmp_path / "a_file" / "p.png", "is a file, not a folder"), (tmp_path / "p.docx", ".docx")]:
        line = error_line(fedsim(*base, "--plot", str(plot)))
        assert "`--plot`" in line and message in line and not out.exists()  # refused before any work
    assert fedsim(*base, "--plot", str(tmp_path / "figures" / "p.pdf")).returncode == 0
    assert (tmp_path / "figures" / "p.pdf").read_bytes().startswith(b"%PDF")


def test_download_without_a_network_says_so(tmp_path, monkeypatch, capsys):
    import torchvision.datasets

    # A port on loopback that nothing listens on stands in for an unreachable mirror.
    monkeypatch.setattr(torchvision.datasets.MNIST, "mirrors", ["http://127.0.0.1:9/"])
    with pytest.raises(SystemExit) as stop:
        cli.main(["run", *QUICK, "--dataset", "mnist", "--data-root", str(tmp_path / "data"), "--download",
                  "--out", str(tmp_path / "r")])
    assert stop.value.code == 2
    assert "Downloading them failed: no network could be reached" in capsys.readouterr().err


def test_datasets_says_what_is_embedded_and_where_it_looks(tmp_path):
    result = fedsim("datasets", "--data-root", str(tmp_path))
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line and not line.startswith("data root")}
    assert "embedded" in rows["mnist-5k"] and "missing" in rows["mnist"] and str(tmp_path / "MNIST") in rows["mnist"]
    assert f"data root: {tmp_path}" in result.stdout


def test_version_and_help(tmp_path):
    assert fedsim("--version").stdout.strip().startswith("fedsim 0.")
    assert list(FIELD_DOCS) == [field.name for field in dataclasses.fields(RunConfig)]  # one text each, in order
    text = fedsim("run", "--help").stdout
    assert "{allreduce,fedadagrad,fedadam,fedasync,fedavg,fedavgm,fedbuff,fednova,fedprox,fedyogi,moon,reweighted,scaffold}" in text and "{batch,group,layer,none}" in text and "vit-tiny" in text
    assert "equal for allreduce, size for reweighted and fedavg" in " ".join(text.split())
    assert "(required)" in text and "default None" not in text


def test_partition_refuses_an_out_that_is_not_json_or_is_the_plot(tmp_path):
    base = ["partition", "--scheme", "iid", "--num-partitions", "4"]
    assert "must end in .json" in error_line(fedsim(*base, "--out", str(tmp_path / "p.png")))
    same = fedsim(*base, "--out", str(tmp_path / "p.json"), "--plot", str(tmp_path / "p.json"))
    assert "name the same file" in error_line(same)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--rond", "3", "--out", "x"], "unrecognized arguments: --rond 3; did you mean --rounds?"),
        (["run", "--rounds", "abc", "--out", "x"], "argument --rounds: invalid int value: 'abc'"),
        (["run", "--local-epochs", "2", "--local-steps", "3", "--out", "x"],
         "`--local-epochs`=2 does nothing when `--local-steps`=3 sets the local work"),
        (["run", "--partition-file", ".", "--out", "x"], "`--partition-file`: . is a folder, not a fedsim partition file"),
    ],
)
def test_usage_errors_are_one_line(tmp_path, args, message):
    result = fedsim(*args, cwd=tmp_path)
    assert message in error_line(result)


def test_compare_help_leaves_out_strategy_and_warnings_are_one_line(tmp_path):
    assert "--strategy " not in fedsim("compare", "--help").stdout
    result = fedsim("partition", "--scheme", "pathological", "--class-assignment-mode", "random",
                    "--classes-per-partition", "1", "--num-partitions", "10", "--out", str(tmp_path / "p.json"))
    assert result.returncode == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if line]
    assert len(warning) == 1 and warning[0].startswith("fedsim partition: warning:") and "--classes-per-partition" in \
        warning[0], result.stderr


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no folder can be made")
@pytest.mark.parametrize("command", ["run", "compare"])
def test_an_out_that_cannot_be_made_is_refused_before_any_output(tmp_path, command):
    # /proc passes a permission check even for root, yet refuses a new folder: only trying tells
    line = error_line(fedsim(command, *QUICK, "--dataset", "digits", "--out", "/proc/fedsim-out/r"))
    assert "cannot write to /proc/fedsim-out/r" in line


def test_a_bad_dataset_option_is_named_as_the_option(tmp_path):
    line = error_line(fedsim("run", *QUICK, "--dataset", "multi-mnist", "--dataset-option", "base=nope",
                             "--out", str(tmp_path / "r")))
    assert "`--dataset-option` base='nope' of 'multi-mnist' names no dataset; known: cifar10" in line
    assert "`--dataset`" not in line


def test_a_failed_download_leaves_nothing_under_the_data_root(tmp_path):
    import os

    # every download goes through a proxy on a loopback port nothing listens on: it fails, network or not
    proxy = {name: "http://127.0.0.1:9" for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}
    environment = {key: value for key, value in os.environ.items() if key.lower() != "no_proxy"}
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.txt").write_text("kept")
    for root in (tmp_path / "typo" / "deeper", tmp_path / "data"):
        result = subprocess.run([sys.executable, "-m", "fedsim", "run", *QUICK, "--dataset", "mnist", "--download",
                                 "--data-root", str(root), "--out", str(tmp_path / "r")],
                                capture_output=True, text=True, env={**environment, **proxy}, check=False)
        assert "Downloading them failed" in error_line(result)
    assert not (tmp_path / "typo").exists()  # the mistyped root is not left behind
    assert sorted(path.name for path in (tmp_path / "data").iterdir()) == ["mine.txt"]  # nor an empty MNIST/raw
