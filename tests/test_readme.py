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


#: README lines that start processes for minutes, whose settings tests/fedsim/test_distributed.py and
#: test_flower.py run: here they are parsed and their config built and checked, not run.
PROCESS_LINES = re.compile(r"^fedsim (ddp|flower simulate|flower deploy) ", re.M)
PARSE_ONLY = Path(__file__).with_name("readme_parse_only.py")


def quick_block(body: str) -> str:
    """Return ``body`` with one round and its DDP and Flower lines checked rather than run."""
    quick = re.sub(r"--rounds \d+", "--rounds 1", body)
    quick = re.sub(r"rounds = \d+", "rounds = 1", quick)  # in a settings file the block writes
    return PROCESS_LINES.sub(lambda line: f"{sys.executable} -P {PARSE_ONLY} {line.group(1)} ", quick)


def test_readme_process_lines_are_checked_not_run():
    # -P: the script's folder (tests/, with its package `fedsim`) must not hide the installed fedsim
    ddp = quick_block("fedsim ddp --nproc 2 --rounds 5 --out r\nfedsim run --rounds 3 --out s\n")
    assert ddp == f"{sys.executable} -P {PARSE_ONLY} ddp --nproc 2 --rounds 1 --out r\nfedsim run --rounds 1 --out s\n"
    assert any(PROCESS_LINES.search(body) for body in fedsim_blocks())  # the README still has such lines


@pytest.mark.parametrize("line, error", [
    ("ddp --nproc 3 --strategy reweighted --num-partitions 2 --out r", "--num-partitions`=2 must equal"),
    ("flower simulate --strategy fedavg --lr -1 --out r", "--lr"),
])
def test_a_process_line_that_would_fail_fails_its_check(line, error):
    result = subprocess.run([sys.executable, "-P", str(PARSE_ONLY), *line.split()], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0 and error in result.stderr, result.stderr[-2000:]


def test_the_readme_has_fedsim_blocks_to_run():
    assert len(fedsim_blocks()) >= 2


# One test per block, each in a folder of its own (no block reads what another wrote), so that the
# suite's workers share them out.
@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(fedsim_blocks())), ids=lambda index: f"block-{index + 1}")
def test_readme_fedsim_blocks_run_with_one_round(tmp_path, index):
    bin_folder = Path(sys.executable).parent  # where `fedsim` is installed beside this Python
    environment = {**os.environ, "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}
    write_files(tmp_path)
    body = fedsim_blocks()[index]
    assert "..." not in body, f"a README command must be runnable as written:\n{body}"
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", quick_block(body)], cwd=tmp_path,
                            env=environment, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, f"{body}\n{result.stderr[-2000:]}"
