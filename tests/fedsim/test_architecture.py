"""The package's shape, read from its own imports (every ``import`` statement, those inside functions too).

The engines are siblings over one round core: none imports another. No import circle. Each layer
imports only below it: the command line and the comparison above the engines, the engines above
the rounds, the rounds above the results and the algorithms.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "fedsim"


def modules() -> dict[str, tuple[Path, bool]]:
    """Return every module of fedsim by dotted name: its file, and whether it is a package's ``__init__``."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def import_graph() -> dict[str, set[str]]:
    """Return each module's fedsim imports (a name imported from a package counts as its module when it is one)."""
    known = modules()
    graph = {}
    for name, (path, is_package) in known.items():
        here = name.split(".") if is_package else name.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module
                targets.update(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target
                               for alias in node.names)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[name] = {target for target in targets if target in known and target != name}
    return graph


GRAPH = import_graph()


def test_no_engine_imports_another():
    crossing = {name: sorted(target for target in targets
                             if target.startswith("fedsim.engines.") and target.split(".")[2] != name.split(".")[2])
                for name, targets in GRAPH.items() if name.startswith("fedsim.engines.")}
    assert {name: targets for name, targets in crossing.items() if targets} == {}


def test_no_import_circle():
    def reaches(start, goal, seen):
        return any(target == goal or (target not in seen and not seen.add(target) and reaches(target, goal, seen))
                   for target in GRAPH[start])

    assert [name for name in GRAPH if reaches(name, name, set())] == []


#: Each package and what it may not import: what stands above it.
ABOVE = {
    "fedsim.rounds": ("fedsim.engines", "fedsim.cli", "fedsim.comparison", "fedsim.flower"),
    "fedsim.results": ("fedsim.rounds", "fedsim.engines", "fedsim.cli", "fedsim.comparison", "fedsim.algorithms"),
    "fedsim.algorithms": ("fedsim.rounds", "fedsim.engines", "fedsim.cli", "fedsim.results", "fedsim.comm"),
    "fedsim.comm": ("fedsim.rounds", "fedsim.engines", "fedsim.cli", "fedsim.results", "fedsim.algorithms"),
    "fedsim.config": ("fedsim.rounds", "fedsim.engines", "fedsim.cli", "fedsim.results", "fedsim.algorithms",
                      "fedsim.comm", "fedsim.client"),
    "fedsim.client": ("fedsim.algorithms", "fedsim.rounds", "fedsim.engines", "fedsim.results", "fedsim.comm",
                      "fedsim.config", "fedsim.cli", "fedsim.comparison"),
    "fedsim.engines": ("fedsim.cli", "fedsim.comparison", "fedsim.flower"),
    # a Flower user's own app drives the round's server and Flower's records; fedsim's engines never need it
    "fedsim.flower": ("fedsim.cli", "fedsim.comparison", "fedsim.engines.inprocess", "fedsim.engines.distributed"),
    # the accountant and the mechanism are arithmetic on the sampling, the updates and the noise: they know no
    # model, round loop, engine or setting file
    "fedsim.privacy": ("fedsim.rounds", "fedsim.engines", "fedsim.cli", "fedsim.comparison", "fedsim.results",
                       "fedsim.algorithms", "fedsim.client", "fedsim.comm", "fedsim.config"),
    # the table of what runs where reads the methods' declarations and the settings; every engine asks it
    "fedsim.support": ("fedsim.rounds", "fedsim.engines", "fedsim.cli", "fedsim.comparison", "fedsim.results"),
}


@pytest.mark.parametrize("package", sorted(ABOVE))
def test_a_layer_imports_nothing_above_it(package):
    upward = {name: sorted(target for target in targets
                           if any(target == high or target.startswith(high + ".") for high in ABOVE[package]))
              for name, targets in GRAPH.items() if name == package or name.startswith(package + ".")}
    assert {name: targets for name, targets in upward.items() if targets} == {}


def test_no_module_is_much_over_400_lines():
    long = {str(path.relative_to(PACKAGE)): lines for path, _ in modules().values()
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > 420}
    assert long == {}
