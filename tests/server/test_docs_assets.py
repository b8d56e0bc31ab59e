"""/docs and /redoc load everything from the server itself: no CDN, no other host.

Why: a server on a machine without internet must still show its API docs, and
reading them must not tell a third party. The pages need a token (as before);
their scripts, styles and icon are public code under /docs-assets/.
"""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from tests.server.conftest import API, SQLITE_ONLY

PAGES = ("/docs", "/redoc")
# Every src= / href= of the page, quoted either way.
REFERENCE = re.compile(r"""(?:src|href)\s*=\s*["']([^"']*)["']""")
INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
CONTENT_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


def _page_outside_the_document(text: str) -> str:
    """The page less its inline scripts (which carry the OpenAPI document, whose
    descriptions may name any URL): what the browser would load by itself."""
    return INLINE_SCRIPT.sub("", text)


@SQLITE_ONLY
@pytest.mark.parametrize("page", PAGES)
def test_the_page_references_only_its_own_origin(api: API, page: str) -> None:
    response = api.get(page)
    assert response.status_code == 200, response.text
    html = _page_outside_the_document(response.text)
    references = REFERENCE.findall(html)
    assert references, html  # at least the script
    for url in references:
        assert url.startswith("/") and not url.startswith("//"), url
    assert "http://" not in html and "https://" not in html, html
    assert "cdn" not in response.text.lower()
    assert "fonts.googleapis" not in response.text


@SQLITE_ONLY
@pytest.mark.parametrize("page", PAGES)
def test_every_asset_answers_without_a_token_with_its_type(api: API, page: str) -> None:
    html = _page_outside_the_document(api.get(page).text)
    for url in REFERENCE.findall(html):
        asset = api.client.get(url)  # no Authorization: as a browser fetches a <script src>
        assert asset.status_code == 200, url
        kind = CONTENT_TYPES[url[url.rindex(".") :]]
        assert asset.headers["content-type"].split(";")[0] == kind, url
        assert len(asset.content) > 1000, url
    expected = "SwaggerUIBundle" if page == "/docs" else "Redoc"
    script = next(u for u in REFERENCE.findall(html) if u.endswith(".js"))
    assert expected in api.client.get(script).text


@SQLITE_ONLY
@pytest.mark.parametrize("page", PAGES)
def test_the_page_policy_allows_only_this_origin_and_its_own_inline_scripts(
    api: API, page: str
) -> None:
    response = api.get(page)
    policy = dict(
        part.strip().split(" ", 1)
        for part in response.headers["content-security-policy"].split(";")
    )
    assert policy["default-src"] == "'self'"
    assert policy["connect-src"] == "'self'"
    sources = policy["script-src"].split()
    assert "'self'" in sources and "'unsafe-inline'" not in sources
    assert not [s for s in sources if "://" in s or s == "*"]
    # Each inline script (Swagger UI's set-up, ReDoc's init: the document) is let run
    # by its hash, and nothing else inline is.
    inline = INLINE_SCRIPT.findall(response.text)
    assert inline
    hashes = {
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in inline
    }
    assert hashes == {s for s in sources if s.startswith("'sha256-")}


@SQLITE_ONLY
def test_the_assets_folder_lists_nothing_and_leaves_nothing(api: API) -> None:
    for path in (
        "/docs-assets/",
        "/docs-assets/nope.js",
        "/docs-assets/../consts.py",
        "/docs-assets/%2e%2e/consts.py",
        "/docs-assets/%2e%2e/core.py",
    ):
        assert api.client.get(path).status_code == 404, path
