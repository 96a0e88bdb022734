"""Every README snippet runs as written: its Python blocks, and its `fedsim` blocks with one round.

A Python block whose first line is ``# file: NAME`` is a file of the user's (an algorithm, a
model): it is written as NAME into the folder where the other blocks run, rather than run itself.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README.read_text(encoding="utf-8")) if lang == language]


FILE = re.compile(r"^# file: (\S+)\n")


def write_files(folder: Path) -> None:
    """Write each ``# file: NAME`` block into ``folder`` as NAME."""
    for body in blocks("python"):
        if match := FILE.match(body):
            (folder / match.group(1)).write_text(body, encoding="utf-8")


def fedsim_blocks() -> list[str]:
    """Return the shell blocks that run `fedsim` (not those that install, test or benchmark)."""
    return [body for body in blocks("sh") if re.search(r"^fedsim ", body, re.M)]


@pytest.mark.slow
def test_readme_python_blocks_run_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path)
    namespace: dict = {}
    for index, body in enumerate(blocks("python")):
        if FILE.match(body):
            continue
        try:
            exec(compile(body, f"README.md python block {index + 1}", "exec"), namespace)
        except Exception as error:
            pytest.fail(f"README python block {index + 1} fails: {type(error).__name__}: {error}\n{body}")


@pytest.mark.slow
def test_readme_fedsim_blocks_run_with_one_round(tmp_path):
    bin_folder = Path(sys.executable).parent  # where `fedsim` is installed beside this Python
    environment = {**os.environ, "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}
    write_files(tmp_path)
    found = fedsim_blocks()
    assert len(found) >= 2
    for body in found:
        assert "..." not in body, f"a README command must be runnable as written:\n{body}"
        quick = re.sub(r"--rounds \d+", "--rounds 1", body)
        quick = re.sub(r"rounds = \d+", "rounds = 1", quick)  # in a settings file the block writes
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", quick], cwd=tmp_path, env=environment,
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"{body}\n{result.stderr[-2000:]}"
