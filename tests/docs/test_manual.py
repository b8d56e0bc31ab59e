"""The manual cannot drift from the code: every ``ringleader`` command in its code
blocks parses with the CLI as it is now, the blocks marked ``<!-- doctest -->`` run
as printed, the generated reference pages are the code's own, and the site builds
with ``mkdocs build --strict`` (a broken link or a page missing from the nav fails)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ringleader.cli import docs_reference
from tests.conftest import require
from tests.helpers.doc_blocks import (
    REPO,
    SHELL_LANGUAGES,
    Block,
    blocks,
    pages,
    ringleader_commands,
    shell_lines,
)
from tests.server.conftest import running_server

README_MAX_LINES = 150
# Each runnable block once: the README's repeat a page's word for word.
RUNNABLE = list(
    {
        (b.text, b.doctest): b for page in reversed(pages()) for b in blocks(page)
        if b.doctest is not None
    }.values()
)  # fmt: skip


def _root() -> Any:
    return docs_reference._loaded_root()


def parse(args: Sequence[str]) -> None:
    """Parse ``ringleader ARGS`` down to its command as the CLI would, running nothing;
    raises the CLI's usage error when a command or option does not exist."""
    command = _root()
    ctx = command.make_context("ringleader", list(args))
    while hasattr(command, "resolve_command"):
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            break
        name, command, rest = command.resolve_command(ctx, rest)
        ctx = command.make_context(name, rest, parent=ctx)


def _commands_of(block: Block) -> list[list[str]]:
    if block.language not in SHELL_LANGUAGES:
        return []
    return [args for line in shell_lines(block.text) for args in ringleader_commands(line)]


def test_the_parse_check_catches_what_a_stale_page_would_say() -> None:
    parse(["launch", "-n", "2", "--", "python", "train.py"])
    parse(["submit-dist", "pytorch", "mnist", "--workers", "2", "--", "python", "x.py"])
    for stale in (["launch", "--nprocs", "2", "--", "x"], ["no-such-command"],
                  ["training", "pytorch", "submit", "m", "--workerz", "2"]):  # fmt: skip
        with pytest.raises(Exception) as raised:
            parse(stale)
        assert type(raised.value).__name__ not in ("Exit", "AssertionError"), stale


def test_blocks_and_commands_are_found_as_a_reader_sees_them() -> None:
    line = "salloc -N 2 ringleader launch --nproc-per-node 2 -- python t.py  # comment"
    assert ringleader_commands(line) == [
        ["launch", "--nproc-per-node", "2", "--", "python", "t.py"]
    ]
    assert ringleader_commands("ringleader: job rl-1 failed (exit code 3)") == []
    assert ringleader_commands("X=1 ringleader list && sudo ringleader image ls") == [
        ["list"],
        ["image", "ls"],
    ]
    assert shell_lines("$ ringleader launch -n 2 \\\n  -- python x.py\n") == [
        "ringleader launch -n 2 -- python x.py"
    ]


def test_every_ringleader_command_in_the_manual_parses() -> None:
    checked, wrong = 0, []
    for page in pages():
        for block in blocks(page):
            for args in _commands_of(block):
                checked += 1
                try:
                    parse(args)
                except BaseException as exc:  # Click's Exit is how --version/--help end
                    if type(exc).__name__ != "Exit":
                        wrong.append(f"{block.where}: ringleader {' '.join(args)}\n    {exc}")
    assert checked >= 150, checked
    assert not wrong, "\n".join(wrong)


def test_the_generated_reference_pages_are_current() -> None:
    for path, text in docs_reference.pages().items():
        assert (REPO / path).read_text() == text, (
            f"{path} is stale: run `make docs` (python -m ringleader.cli.docs_reference)"
        )


def test_the_reference_names_every_command_and_route() -> None:
    cli = (REPO / docs_reference.CLI_PAGE).read_text()
    for words in (["launch"], ["training", "pytorch", "submit"], ["doctor"], ["nodes", "add"]):
        assert f"`ringleader {' '.join(words)}`" in cli, words
    assert "`--require-path`" in cli
    rest = (REPO / docs_reference.REST_PAGE).read_text()
    for route in docs_reference.openapi_document()["paths"]:
        assert f" {route}`" in rest, route


def test_the_readme_is_short_and_its_links_lead_somewhere() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert len(targets) >= 20
    missing = [t for t in targets if not t.startswith("http") and not (REPO / t).exists()]
    assert not missing, missing


def test_the_site_builds_strict(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    require(mkdocs.exists(), "mkdocs (pip install -e '.[docs]')")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    nav = (tmp_path / "site" / "index.html").read_text()
    for page in ("quickstart/", "from-runai/", "reference/cli/", "reference/rest/"):
        assert page in nav, page


def _run_block(block: Block, cwd: Path, env: dict[str, str]) -> None:
    script = "set -euo pipefail\n" + "\n".join(shell_lines(block.text)) + "\n"
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, (
        f"{block.where} failed (exit {done.returncode}):\n{block.text}\n"
        f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
    )


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.where for b in RUNNABLE])
def test_a_runnable_block_runs_as_printed(block: Block, tmp_path: Path) -> None:
    """In a fresh home and an empty directory, with the venv's ``ringleader`` and
    ``python`` first on PATH, as a reader who activated it would type them."""
    assert block.doctest in ("", "server"), f"{block.where}: unknown doctest mark"
    bin_dir = str(Path(sys.executable).parent)
    work = tmp_path / "work"
    work.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_")}
    base["PATH"] = bin_dir + os.pathsep + base.get("PATH", "")
    assert shutil.which("ringleader", path=base["PATH"]), "ringleader is not installed"
    if block.doctest == "server":
        with running_server(tmp_path / "home") as server:
            _run_block(block, work, {**base, **{k: server.env[k] for k in
                                                ("RINGLEADER_HOME", "RINGLEADER_URL")}})  # fmt: skip
    else:
        _run_block(block, work, {**base, "RINGLEADER_HOME": str(tmp_path / "home")})


def test_every_screenshot_in_the_manual_is_one_a_browser_test_takes() -> None:
    """docs/ui's images are the browser tests' own shots (copied by `make
    docs-screenshots`), so each names a page state a test reaches and checks."""
    taken = "\n".join(p.read_text() for p in (REPO / "tests").rglob("*_browser.py"))
    images = sorted((REPO / "docs" / "ui").glob("*.png"))
    assert images
    untaken = [
        p.name
        for p in images
        if f'shot("{p.stem}"' not in taken and f'_shots(ui, "{p.stem}"' not in taken
    ]
    assert not untaken, untaken
