"""docs/developers.md names real files and symbols, and a page added the way it says
is served (behind the login) like every other page."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from fastapi.testclient import TestClient

from ringleader.server import ui
from ringleader.server.app import create_app
from ringleader.server.config import ServerConfig
from ringleader.server.models import User
from ringleader.server.ui.render import page
from ringleader.server.ui.session import ui_user
from tests.server.conftest import API
from tests.server.ui.forms import HTML, login_response

REPO = Path(__file__).resolve().parents[1]
DOC = (REPO / "docs" / "developers.md").read_text()
# "`NAME` in `ringleader/path.py`" and "`NAME` (`ringleader/path.py`)"
NAMED = re.compile(r"`([A-Za-z_][\w.]*)`(?:\s+in| \(|\s+\()\s*`(ringleader/[\w/]+\.py)`")
PATHS = re.compile(r"`((?:ringleader|tests)/[\w/]+\.py)`")


def _defined(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _file(path: str) -> Path:
    return REPO / ("src/" + path if path.startswith("ringleader/") else path)


def test_every_file_the_page_names_exists() -> None:
    paths = set(PATHS.findall(DOC))
    assert len(paths) >= 10
    assert not [p for p in sorted(paths) if not _file(p).is_file()]


@pytest.mark.parametrize(("symbol", "path"), sorted(set(NAMED.findall(DOC))))
def test_every_symbol_the_page_names_is_defined_where_it_says(symbol: str, path: str) -> None:
    assert symbol.split(".")[0] in _defined(_file(path)), f"{symbol} not in {path}"


def test_a_page_added_to_pages_is_served_behind_the_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toy = APIRouter(include_in_schema=False)

    @toy.get("/toy", response_class=HTMLResponse)
    def toy_page(request: Request, user: User = Depends(ui_user)) -> HTMLResponse:
        return page(request, "error.html", user, title="Toy", message="a toy page")

    monkeypatch.setattr(ui, "PAGES", [*ui.PAGES, toy])
    app = create_app(ServerConfig(data_dir=tmp_path, background=False, run_as="server"))
    with TestClient(app) as client:
        api = API(client, tmp_path)
        away = client.get("/toy", headers=HTML, follow_redirects=False)
        assert away.status_code == 303 and away.headers["location"] == "/login?next=/toy"
        assert login_response(api, next="/toy").status_code == 303
        shown = client.get("/toy", headers=HTML)
        assert shown.status_code == 200 and "a toy page" in shown.text
        assert "content-security-policy" in shown.headers  # every page's headers
