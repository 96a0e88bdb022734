"""A bug in a user's method: named with its hook, class and file, and not reported as bad input.

The methods are written to a file and named by reference (``methods.py:Name``), as a user names
theirs; the run starts in that file's folder, so that messages name the file as the user typed it.
"""

import json
import subprocess
import sys
import textwrap

import pytest

from fedsim.cli import main
from fedsim.cli.flag_messages import flag_message
from fedsim.config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.references import START_FOLDER_ENV
from fedsim.user_code import UserCodeError
from fedsim.results.outcome import resume_hint

METHODS = textwrap.dedent('''
    import torch

    from fedsim.algorithms import Algorithm


    class Short(Algorithm):
        """Its combination lacks the last tensor."""

        def aggregate(self, models, weights, global_state, clients):
            return super().aggregate(models, weights, global_state, clients)[:-1]


    class Single(Algorithm):
        """Its combination is float32 in a float64 run."""

        def aggregate(self, models, weights, global_state, clients):
            return [tensor.float() for tensor in super().aggregate(models, weights, global_state, clients)]


    class Flat(Algorithm):
        """Its combination is flattened."""

        def aggregate(self, models, weights, global_state, clients):
            return [tensor.flatten() for tensor in super().aggregate(models, weights, global_state, clients)]


    class NoWeight(Algorithm):
        """Its scale forgets to return."""

        def scale(self, weight, num_steps):
            weight / num_steps


    class Penalty(Algorithm):
        """Its local terms are a dict."""

        def local_terms(self, client, global_state):
            return {"mu": 0.1}


    class NewDelta(Algorithm):
        """Its to_delta returns a new delta, which the round would drop."""

        def to_delta(self, combined, global_state):
            return [c - g for c, g in zip(combined, global_state)]
''')

#: 2 clients of the 8x8 digits, one full-shard step each, in float64: a round in about a second.
TINY = {"dataset": "digits", "model": "mlp", "num_partitions": 2, "rounds": 2, "local_steps": 1, "batch_size": 1000,
        "dtype": "float64"}
TINY_FLAGS = [word for key, value in TINY.items() for word in (f"--{key.replace('_', '-')}", str(value))]


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    """A folder holding the user's ``methods.py``, where the run starts."""
    (tmp_path / "methods.py").write_text(METHODS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(START_FOLDER_ENV, raising=False)
    return tmp_path


@pytest.mark.parametrize("method, message", [
    ("Short", r"`Short.aggregate` in methods.py returned (\d+) tensors, but the round needs (?!\1)\d+: one per tensor "
              r"of `global_state` \(the model's parameters, then its floating-point buffers\), in that order"),
    ("Single", r"`Single.aggregate` in methods.py returned a tensor of dtype torch.float32 at position 0, where "
               r"`global_state` holds one of dtype torch.float64"),
    ("Flat", r"`Flat.aggregate` in methods.py returned a tensor of shape \(\d+,\) at position 0, where `global_state` "
             r"holds one of shape \(\d+, \d+\)"),
    ("NoWeight", r"`NoWeight.scale` in methods.py returned None, not a finite number"),
    ("Penalty", r"`Penalty.local_terms` in methods.py returned a dict, not a fedsim.algorithms.LocalTerms"),
    ("NewDelta", r"`NewDelta.to_delta` in methods.py returned a list of \d+, which the round would drop: `to_delta` "
                 r"changes its first argument in place and returns None"),
])
def test_a_hook_returning_what_its_contract_forbids_is_named_with_its_class_and_file(user_folder, method, message):
    with pytest.raises(UserCodeError, match=message):
        run(RunConfig(strategy=f"methods.py:{method}", **TINY))


def test_on_the_command_line_it_is_one_line_of_its_own_with_status_1_not_bad_inputs_2(user_folder, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--strategy", "methods.py:Short", *TINY_FLAGS, "--out", "out"])  # with its progress bar
    err = capsys.readouterr().err
    assert exit_.value.code == 1, err
    lines = err.split("\n")
    error = next((line for line in lines if "error:" in line), "")
    # the progress bar's line is ended first: the message starts a line, not glued to the bar
    assert error.startswith("fedsim run: error: `Short.aggregate` in methods.py returned "), err
    assert "Traceback" not in err and "--resume" not in err


@pytest.mark.slow
def test_on_flower_the_hook_is_named_and_no_resume_is_advised_without_a_checkpoint(user_folder):
    result = subprocess.run([sys.executable, "-m", "fedsim", "flower", "simulate", "--strategy", "methods.py:Short",
                             *TINY_FLAGS, "--quiet", "--out", "out"],
                            capture_output=True, text=True, cwd=user_folder, check=False, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("fedsim flower simulate: error: `Short.aggregate` in methods.py returned "), \
        result.stderr[-3000:]
    assert "did not finish" not in result.stderr and "resume" not in result.stderr
    # the ServerApp's process recorded it in the folder the command read it back from
    summary = json.loads((user_folder / "out" / "summary.json").read_text())["short"]
    assert summary["user_code_error"] in last


def test_resuming_is_advised_only_where_a_checkpoint_holds_a_round(tmp_path):
    (tmp_path / "stopped").mkdir()
    assert resume_hint(tmp_path / "stopped") == ""
    run(RunConfig(**{**TINY, "rounds": 1}), tmp_path / "done")
    hint = resume_hint(tmp_path / "done")
    assert str(hint) == "; `resume`=True continues from its checkpoint of round 1"
    assert flag_message(hint) == "; `--resume` continues from its checkpoint of round 1"
