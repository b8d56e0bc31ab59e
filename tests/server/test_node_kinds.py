"""Node kinds declared once (``server/node_kinds.py``): the sets other modules use are
derived from the one table, and each kind names a backend that exists."""

from __future__ import annotations

import ast
from pathlib import Path

from ringleader.server import node_kinds
from ringleader.server.backends import REGISTRY
from ringleader.server.engine_pools import ENGINE_KINDS
from ringleader.server.inventory import LOCAL_KINDS
from ringleader.server.ui.nodes_page import KINDS as UI_LABELS

SERVER = Path(node_kinds.__file__).parent


def test_every_kind_runs_on_a_registered_backend_and_has_words() -> None:
    for name, kind in node_kinds.KINDS.items():
        assert kind.backend in REGISTRY, name
        assert UI_LABELS[name].startswith(name)
    assert {"local", "simulated"} == LOCAL_KINDS and {"slurm"} == ENGINE_KINDS
    assert node_kinds.backend_for("ssh") == "ssh" and node_kinds.backend_for("slurm") == "slurm"
    assert node_kinds.backend_for("local") is None and node_kinds.backend_for("nope") is None
    assert node_kinds.reached_by_ssh("ssh") and not node_kinds.reached_by_ssh("local")


def test_no_server_module_spells_a_kind_in_a_comparison() -> None:
    """``kind == "ssh"`` anywhere but the table is a second declaration."""
    spelled = []
    for path in SERVER.rglob("*.py"):
        if path.name == "node_kinds.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and "kind" in ast.unparse(node.left):
                for right in node.comparators:
                    if isinstance(right, ast.Constant) and right.value in node_kinds.KINDS:
                        spelled.append(f"{path.relative_to(SERVER)}:{node.lineno}")
    assert not spelled, spelled
