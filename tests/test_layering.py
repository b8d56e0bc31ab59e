"""The house's layering: every import points down and none runs in a circle.

Why: an import that runs back up (the UI importing the CLI, ``errors`` importing
the server, the launch and Slurm packages importing each other) is a door each
next capability has to walk around, and a cycle hidden by an import inside a
function breaks the day someone moves it to the top.  Imports inside functions
count here as much as those at the top; only ``if TYPE_CHECKING:`` blocks (never
run) are left out.

The layers, bottom up: the leaf modules (``errors``, ``defaults``, ``hosts`` ...),
``runtime`` (what a rank imports), ``slurm`` (Slurm's commands in Python), ``launch``
(a gang of ranks, on its own or inside Slurm), ``sched`` (pure decisions), ``spec``,
``cluster``, ``server``, the client, ``cli``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str:
    """The module ``name`` (a module, or a name inside one) is found in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Ids of the import nodes inside ``if TYPE_CHECKING:`` blocks."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                hidden.update(id(n) for n in ast.walk(inner))
    return hidden


def _imports(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text())
    hidden = _type_checking_only(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            found.update(_owner(a.name) for a in node.names if a.name.startswith("ringleader"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ringleader"):
            module_name = node.module or ""
            for alias in node.names:
                full = f"{module_name}.{alias.name}"
                found.add(_owner(full) if full in MODULES else _owner(module_name))
    found.discard(module)
    found.discard("")
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


# (package, packages it must never import)
RULES = [
    ("sched", {"server", "cli", "launch", "slurm", "cluster"}),
    ("launch", {"server", "cli", "cluster", "sched"}),
    ("slurm", {"server", "cli", "launch"}),
    ("runtime", {"server", "cli", "slurm", "sched", "cluster", "launch"}),
    ("server", {"cli"}),
    ("errors", {"server", "cli", "launch", "slurm", "sched", "runtime", "spec"}),
    ("spec", {"server", "cli"}),
]


@pytest.mark.parametrize(("package", "forbidden"), RULES, ids=[r[0] for r in RULES])
def test_a_package_never_imports_a_layer_above_it(package: str, forbidden: set[str]) -> None:
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if _package(module) == package
        for target in targets
        if _package(target) in forbidden
    )
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle() -> None:
    """Tarjan's strongly connected components of the import graph: all single."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative depth-first search: (node, iterator over its targets).
        work = [(start, iter(sorted(GRAPH[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(GRAPH[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_the_graph_sees_imports_inside_functions() -> None:
    """The checks above would pass vacuously if lazy imports were missed."""
    assert "ringleader.launch.slurm_batch" in GRAPH["ringleader.launch.command"]  # in run()


def test_no_test_module_imports_another() -> None:
    """Shared test code lives in tests/helpers (or tests/fixtures), never in a test module
    another one imports: running or moving one test file must not change another."""
    tests = Path(__file__).resolve().parent
    wrong = []
    for path in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if module and module.startswith("tests.") and module.rpartition(".")[2][:5] == "test_":
                wrong.append(f"{path.relative_to(tests)} imports {module}")
    assert not wrong, "\n".join(wrong)
