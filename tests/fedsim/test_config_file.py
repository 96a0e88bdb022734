"""Settings files: top-level keys for every command, a command's table over them, `out` and `strategies` in the file."""

import json

import pytest

from fedsim.config import from_toml

from .test_cli import fedsim
from .test_cli_settings import error_line

QUICK = 'dataset = "digits"\nmodel = "mlp"\nbatch-size = 20\nnum-partitions = 4\nrounds = 1\n'


def test_one_file_describes_a_run_and_a_comparison(tmp_path):
    settings = tmp_path / "study.toml"
    settings.write_text(QUICK + 'lr = 0.2\nout = "{out}"\n[run]\nlr = 0.1\nfraction = 0.5\n'
                        '[compare]\nstrategies = ["fedavg", "allreduce"]\nout = "{compared}"\n'
                        .format(out=tmp_path / "r", compared=tmp_path / "c"))
    run = fedsim("run", "--config", str(settings), "--quiet")
    assert run.returncode == 0, run.stderr
    saved = json.loads((tmp_path / "r" / "config.json").read_text())
    assert (saved["lr"], saved["fraction"], saved["dataset"]) == (0.1, 0.5, "digits")  # [run] over the top level
    compared = fedsim("compare", "--config", str(settings), "--quiet")
    assert compared.returncode == 0, compared.stderr
    saved = json.loads((tmp_path / "c" / "config.json").read_text())
    assert saved["strategies"] == ["fedavg", "allreduce"] and saved["lr"] == 0.2 and saved["fraction"] == 1.0
    assert sorted(path.name for path in (tmp_path / "c").iterdir() if path.is_dir()) == ["allreduce", "fedavg"]


def test_flags_override_the_file_and_its_command_table(tmp_path):
    settings = tmp_path / "s.toml"
    settings.write_text(QUICK + '[compare]\nstrategies = "fedavg,allreduce"\nlr = 0.3\n')
    result = fedsim("compare", "--config", str(settings), "--strategies", "fedavg", "--lr", "0.05", "--quiet",
                    "--out", str(tmp_path / "c"))
    assert result.returncode == 0, result.stderr
    saved = json.loads((tmp_path / "c" / "config.json").read_text())
    assert saved["strategies"] == ["fedavg"] and saved["lr"] == 0.05


@pytest.mark.parametrize(
    "content, command, message",
    [
        (QUICK + "local-epochs = 2\nlocal_epochs = 3\n", "run",
         "{file}, line 7: 'local-epochs' and 'local_epochs' set the same setting; keep one of them"),
        (QUICK + "[compare]\nlocal_epoch = 2\n", "compare",
         "unknown key 'local_epoch' in {file}, line 7 (did you mean 'local_epochs'?); known keys:"),
        (QUICK + "[ddp]\nlocal_epoch = 2\n", "run", "unknown key 'local_epoch' in {file}, line 7"),  # any table
        ('strategies = "fedavg"\n', "run",
         "{file}, line 1: `--strategies` is read by `fedsim compare` only; put it in a [compare] table"),
        ('[compare]\nstrategies = "fedavg,fedsgd"\n', "compare", "{file}, line 2: unknown strategy"),
        ("out = 3\n", "run", "{file}, line 1: `--out` must be a folder path (text), got 3"),
        ("compare = 3\n", "compare", "{file}, line 1: `compare` must be a table ([compare])"),
        ("[run]\nlr = 0.1\n[compare]\nlr = -1\n", "compare", "{file}, line 4: `--lr` must be a finite number > 0"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_key_and_its_line(tmp_path, content, command, message):
    settings = tmp_path / "s.toml"
    settings.write_text(content)
    line = error_line(fedsim(command, "--config", str(settings), "--out", str(tmp_path / "o")))
    assert message.format(file=settings) in line
    assert not (tmp_path / "o").exists()


def test_out_is_required_from_the_flag_or_the_file(tmp_path):
    settings = tmp_path / "s.toml"
    settings.write_text(QUICK)
    assert "`--out` is required" in error_line(fedsim("run", "--config", str(settings)))
    assert "`--out` is required" in error_line(fedsim("compare"))


def test_from_toml_reads_the_top_level_and_the_run_table(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('lr = 0.2\nout = "x"\n[run]\nstrategy = "allreduce"\n[compare]\nlr = 0.3\n')
    config = from_toml(path)
    assert (config.strategy, config.lr) == ("allreduce", 0.2)


@pytest.mark.parametrize("setting", ["personalize-steps = 2", "eval-clients-every = 2", "holdout-clients = 0.25",
                                     "client-target = 0.5"])
def test_a_setting_of_the_local_test_sets_is_read_beside_its_fraction_and_refused_without(tmp_path, setting):
    """Each value is checked alone before the file's settings meet: one that needs another must not fail there.

    A run's own config.json holds such pairs, so `--resume` of a run with `--personalize-steps` read them too.
    """
    path = tmp_path / "s.toml"
    path.write_text(f"local-test-fraction = 0.2\n{setting}\n")
    config = from_toml(path)
    assert config.local_test_fraction == 0.2
    path.write_text(f"{setting}\n")
    with pytest.raises(ValueError, match=f"`{setting.split(' ')[0].replace('-', '_')}` applies to the clients' local"):
        from_toml(path)
