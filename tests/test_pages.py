"""Every page's code runs as written: the README's and the site's (``docs/``), their Python blocks in
order, and their `fedsim` blocks with one round.

A Python block whose first line is ``# file: NAME`` is a file of the user's (an algorithm, a
model): it is written as NAME into the folder where every page's blocks run, rather than run
itself, so a page may use a file another page writes (and says so). The blocks run in a folder of
their own, beside a link to the repository's ``examples/``, as from the repository's root.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The pages a reader runs code from: the README, and the site's hand-written pages (not the
#: gallery sphinx-gallery writes from its scripts, which the site's build runs, nor the build).
PAGES = sorted([ROOT / "README.md", *(path for path in (ROOT / "docs").rglob("*.md")
                                      if not {"_build", "gallery"} & set(path.relative_to(ROOT / "docs").parts))])
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def page_name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def blocks(page: Path, language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(page.read_text(encoding="utf-8")) if lang == language]


FILE = re.compile(r"^# file: (\S+)\n")


def write_files(folder: Path) -> None:
    """Write each page's ``# file: NAME`` blocks into ``folder`` as NAME, and link ``examples/`` there."""
    for page in PAGES:
        for body in blocks(page, "python"):
            if match := FILE.match(body):
                (folder / match.group(1)).write_text(body, encoding="utf-8")
    (folder / "examples").symlink_to(ROOT / "examples", target_is_directory=True)


def fedsim_blocks(page: Path) -> list[str]:
    """Return the shell blocks that run `fedsim` (not those that install, test or benchmark)."""
    return [body for body in blocks(page, "sh") if re.search(r"^fedsim ", body, re.M)]


def test_the_pages_include_the_readme_and_every_tutorial():
    names = {page_name(page) for page in PAGES}
    assert {"README.md", "docs/getting-started.md", "docs/tutorials/partitions.md"} <= names
    assert len([name for name in names if name.startswith("docs/tutorials/")]) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("page", [page for page in PAGES if blocks(page, "python")], ids=page_name)
def test_a_pages_python_blocks_run_in_order(tmp_path, monkeypatch, page):
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path)
    namespace: dict = {}
    for index, body in enumerate(blocks(page, "python")):
        if FILE.match(body):
            continue
        try:
            exec(compile(body, f"{page_name(page)} python block {index + 1}", "exec"), namespace)
        except Exception as error:
            pytest.fail(f"{page_name(page)} python block {index + 1} fails: {type(error).__name__}: {error}\n{body}")


#: Lines that start processes for minutes, whose settings tests/fedsim/test_distributed.py and
#: test_flower.py run: here they are parsed and their config built and checked, not run.
PROCESS_LINES = re.compile(r"^fedsim (ddp|flower simulate|flower deploy) ", re.M)
PARSE_ONLY = Path(__file__).with_name("page_parse_only.py")


def quick_block(body: str) -> str:
    """Return ``body`` with one round and its DDP and Flower lines checked rather than run."""
    quick = re.sub(r"--rounds \d+", "--rounds 1", body)
    quick = re.sub(r"rounds = \d+", "rounds = 1", quick)  # in a settings file the block writes
    return PROCESS_LINES.sub(lambda line: f"{sys.executable} -P {PARSE_ONLY} {line.group(1)} ", quick)


def test_process_lines_are_checked_not_run():
    # -P: the script's folder (tests/, with its package `fedsim`) must not hide the installed fedsim
    ddp = quick_block("fedsim ddp --nproc 2 --rounds 5 --out r\nfedsim run --rounds 3 --out s\n")
    assert ddp == f"{sys.executable} -P {PARSE_ONLY} ddp --nproc 2 --rounds 1 --out r\nfedsim run --rounds 1 --out s\n"
    assert any(PROCESS_LINES.search(body) for page in PAGES for body in fedsim_blocks(page))  # pages still have them


@pytest.mark.parametrize("line, error", [
    ("ddp --nproc 3 --strategy reweighted --num-partitions 2 --out r", "--num-partitions`=2 must equal"),
    ("flower simulate --strategy fedavg --lr -1 --out r", "--lr"),
])
def test_a_process_line_that_would_fail_fails_its_check(line, error):
    result = subprocess.run([sys.executable, "-P", str(PARSE_ONLY), *line.split()], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0 and error in result.stderr, result.stderr[-2000:]


def test_the_readme_and_the_tutorials_have_fedsim_blocks_to_run():
    assert len(fedsim_blocks(ROOT / "README.md")) >= 1
    assert sum(len(fedsim_blocks(page)) for page in PAGES) >= 15


# One test per block, each in a folder of its own (no block reads what another wrote), so that the
# suite's workers share them out.
FEDSIM_BLOCKS = [(page, index) for page in PAGES for index in range(len(fedsim_blocks(page)))]


@pytest.mark.slow
@pytest.mark.parametrize("page, index", FEDSIM_BLOCKS,
                         ids=[f"{page_name(page)}-block-{index + 1}" for page, index in FEDSIM_BLOCKS])
def test_a_pages_fedsim_blocks_run_with_one_round(tmp_path, page, index):
    bin_folder = Path(sys.executable).parent  # where `fedsim` is installed beside this Python
    environment = {**os.environ, "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}
    write_files(tmp_path)
    body = fedsim_blocks(page)[index]
    assert "..." not in body, f"a command on a page must be runnable as written:\n{body}"
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", quick_block(body)], cwd=tmp_path,
                            env=environment, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, f"{page_name(page)}:\n{body}\n{result.stderr[-2000:]}"


GALLERY = ROOT / "docs" / "gallery_src"


def test_the_gallery_draws_every_partition_scheme():
    import partitions

    # every function of `partitions` makes a partition (or, for feature skew, its noise levels), but one
    schemes = [name for name in partitions.__all__ if name[0].islower() and name != "split_local_test"]
    assert {"iid", "dirichlet", "feature_noise_levels"} <= set(schemes), schemes
    made = {name: [] for name in schemes}
    for script in sorted(GALLERY.glob("plot_*.py")):
        text = script.read_text(encoding="utf-8")
        assert "plot." in text or "plt." in text, f"{script.name} draws nothing"
        for name in re.findall(r"\bpartitions\.(\w+)\(", text):
            made.setdefault(name, []).append(script.name)
    assert all(made[name] for name in schemes), {name: where for name, where in made.items() if not where}


def test_the_api_reference_documents_every_public_name():
    # the modules whose own `automodule` lists their members (`fedsim.data`, ...) document their
    # `__all__` by construction; these name theirs one by one, and a new name must be added
    import fedsim
    import fedsim.flower
    import partitions

    reference = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    public = [f"partitions.{name}" for name in partitions.__all__] + \
        [f"fedsim.{name}" for name in fedsim.__all__ if name != "__version__"] + \
        [f"fedsim.flower.{name}" for name in fedsim.flower.__all__]
    assert [name for name in public if not re.search(rf":: {re.escape(name)}$", reference, re.M)] == []
