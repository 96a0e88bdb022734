"""Every message that names a setting carries it, so that the command line words it as a flag without rewriting text."""

import ast
import pickle
import re
import warnings
from pathlib import Path

import pytest

from fedsim.checks import NAMED_ALONE, SettingError, SettingTypeError, SettingWarning
from fedsim.cli.flag_messages import PARAMETER_FLAGS, flag_message, flag_word

ROOT = Path(__file__).resolve().parents[2]
BACKTICKED = re.compile(r"(?<!`)`(\w+)`(?!`)")  # ``name`` is markup of a text, not a message


def docstrings(tree: ast.AST) -> set[int]:
    """Return the ids of the docstring constants of ``tree``'s module, classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def settings_named_in_text() -> list[str]:
    """Return each string in fedsim's and partitions' code (docstrings aside) that names a setting as literal text."""
    offending = []
    for path in sorted([*(ROOT / "fedsim").rglob("*.py"), *(ROOT / "partitions").rglob("*.py")]):
        tree = ast.parse(path.read_text())
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                named = set(BACKTICKED.findall(node.value)) & set(PARAMETER_FLAGS)
                if named:
                    offending.append(f"{path.relative_to(ROOT)}:{node.lineno}: {sorted(named)}")
    return offending


def test_no_message_names_a_setting_in_its_text():
    # a setting is a placeholder of a SettingError's template ("{mu}"), never "`mu`" in the text
    assert settings_named_in_text() == []


def test_a_setting_error_reads_in_parameters_here_and_in_flags_on_the_command_line():
    error = SettingError("{amp} computes in bfloat16/float16, which defeats {dtype}; use one of the two",
                         amp=True, dtype="float64")
    assert str(error) == "`amp`=True computes in bfloat16/float16, which defeats `dtype`='float64'; use one of the two"
    assert flag_message(error) == ("`--amp` computes in bfloat16/float16, which defeats `--dtype`='float64'; use one "
                                   "of the two")
    assert error.settings == ["amp", "dtype"] and isinstance(error, ValueError)


def test_a_reason_inside_a_message_is_worded_with_it():
    reason = SettingError("{micro_batches:name} splits a step", micro_batches=2)
    refusal = SettingError("{vectorize}: {reason:text}; leave {vectorize:name} out", vectorize=True, reason=reason)
    assert str(refusal) == "`vectorize`=True: `micro_batches` splits a step; leave `vectorize` out"
    assert flag_message(refusal) == "`--vectorize`: `--micro-batches` splits a step; leave `--vectorize` out"
    assert refusal.settings == ["vectorize", "micro_batches", "vectorize"]


def test_a_check_of_any_parameter_names_the_setting_it_checks():
    error = SettingTypeError("{setting:name} must be an integer, got {got:text}",
                             fields={"setting": "num_classes_per_partition"}, setting="2", got="'2'")
    assert str(error) == "`num_classes_per_partition` must be an integer, got '2'" and isinstance(error, TypeError)
    assert flag_message(error) == "`--classes-per-partition` must be an integer, got '2'"
    assert flag_word("labels", NAMED_ALONE) == "`labels`"  # no flag sets it: the library's name


def test_an_error_raised_in_another_process_arrives_with_its_settings():
    error = SettingError("{fused} does nothing with {strategy}", fused=False, strategy="scaffold")
    arrived = pickle.loads(pickle.dumps(error))
    assert type(arrived) is SettingError and str(arrived) == str(error)
    assert flag_message(arrived) == "`--no-fused` does nothing with `--strategy`='scaffold'"


def test_a_warning_carries_its_settings_too():
    with pytest.warns(SettingWarning) as caught:
        warnings.warn(SettingWarning("{classes_per_partition} leaves some class held by no one",
                                     classes_per_partition=1))
    assert flag_message(caught[0].message) == "`--classes-per-partition`=1 leaves some class held by no one"


def test_a_setting_written_with_its_value_needs_one():
    with pytest.raises(KeyError, match=r"give one, or write \{mu:name\}"):
        SettingError("{mu} is too large")
