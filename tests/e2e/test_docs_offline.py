"""The docs UI works offline: the page and every asset it references come from the service itself."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import httpx

from tests.support.server import ServiceProcess, service_env

KEY = "docs-key-0123456789"
_REFERENCE = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_ABSOLUTE_URL = re.compile(r"""["'(]((?:https?:)?//[^"'()\s]+)""")


def test_the_docs_pages_and_every_asset_they_reference_come_from_the_service_itself(tmp_path):
    with ServiceProcess(service_env(tmp_path / "memory.db", {"MEMORY_API_KEY": KEY})) as server, \
            httpx.Client(base_url=server.url) as http:
        for page in ("/schema", "/schema/swagger"):
            html = http.get(page)  # no key: a browser opens the page before it can authorize
            assert html.status_code == 200 and "SwaggerUIBundle" in html.text
            assert _ABSOLUTE_URL.findall(html.text) == []  # no CDN, no font host, no external favicon
            references = _REFERENCE.findall(html.text)
            assert len(references) == 4  # favicon, stylesheet, bundle, standalone preset
            for reference in references:
                url = urljoin(f"{server.url}{page}", reference)
                assert urlsplit(url).netloc == urlsplit(server.url).netloc, reference
                asset = http.get(url)
                assert asset.status_code == 200, reference
                assert len(asset.content) > 500 and asset.headers["content-type"].split(";")[0] in (
                    "text/javascript", "text/css", "image/png"), reference
        auth = {"Authorization": f"Bearer {KEY}"}
        assert http.get("/schema/assets/index.html", headers=auth).status_code == 404  # only the UI's own files
        assert http.get("/sessions").status_code == 401  # the API itself still needs the key
