"""Every README snippet runs as written: its Python blocks, and its `fedsim` lines with few rounds."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
# Settings that make a command quick without changing what it shows.
QUICK = {"--rounds": "1", "--num-partitions": None}


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README.read_text(encoding="utf-8")) if lang == language]


def fedsim_commands() -> list[list[str]]:
    """Return the README's `fedsim` command lines (continuations joined, comments dropped) as argv lists."""
    commands = []
    for body in blocks("sh"):
        for line in body.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "fedsim":
                commands.append(words[1:])
    return commands


def quick(args: list[str]) -> list[str]:
    """Cut the rounds to one, keep everything else as the README writes it."""
    args = list(args)
    for flag, value in QUICK.items():
        if flag in args and value is not None:
            args[args.index(flag) + 1] = value
    return args + (["--quiet"] if args and args[0] in ("run", "compare") else [])


@pytest.mark.slow
def test_readme_python_blocks_run_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for index, body in enumerate(blocks("python")):
        try:
            exec(compile(body, f"README.md python block {index + 1}", "exec"), namespace)
        except Exception as error:
            pytest.fail(f"README python block {index + 1} fails: {type(error).__name__}: {error}\n{body}")


@pytest.mark.slow
def test_readme_fedsim_lines_run(tmp_path):
    commands = fedsim_commands()
    assert len(commands) >= 8
    for args in commands:
        assert "..." not in args, f"a README command must be runnable as written: fedsim {shlex.join(args)}"
        result = subprocess.run([sys.executable, "-m", "fedsim", *quick(args)], cwd=tmp_path, capture_output=True,
                                text=True, check=False)
        assert result.returncode == 0, f"fedsim {shlex.join(args)}\n{result.stderr}"
