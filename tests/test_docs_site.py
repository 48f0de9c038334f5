"""The documentation site builds with ``mkdocs build --strict``: a broken link or anchor, a page
missing from the navigation, or a generated page whose source moved fails the suite.

The configuration table, the API reference and the MCP tool list are generated at build time from
``Settings``, the app's OpenAPI schema and the MCP server (``docs/hooks/``); the checks below read
the built pages, so a setting, route or tool the code has is on the site.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from app.config import Settings

ROOT = Path(__file__).resolve().parents[1]
# Words of a work diary, not of a product: no page or README says when or in which pass it was made.
DIARY = re.compile(r"\bround[- ]?\d+\b|\bround (?:one|two|three|four|five)\b|\bsession's tests\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "client"), os.environ.get("PYTHONPATH", "")]),
           "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(target)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return target


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))


def _table_rows(page: Path) -> dict[str, list[str]]:
    """First cell -> the row's cells, as text, for every table row of a built page."""
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", page.read_text(), re.S):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if cells:
            rows[cells[0]] = cells
    return rows


def test_the_configuration_page_lists_every_setting_with_its_default(site):
    rows = _table_rows(site / "configuration" / "index.html")
    for info in msgspec.inspect.type_info(Settings).fields:
        assert info.encode_name in rows, f"the configuration page has no row for {info.encode_name}"
        plain = isinstance(info.default, (int, float, str)) and not isinstance(info.default, bool)
        if not info.required and plain:
            default = rows[info.encode_name][1]
            assert default.startswith(str(info.default)), f"{info.encode_name}: the page says {default!r}, the code {info.default!r}"


def test_the_api_reference_lists_every_route_of_the_schema(site):
    from docs.hooks.openapi_reference import openapi_schema

    page = _text(site / "api" / "reference" / "index.html")
    for path, item in openapi_schema()["paths"].items():
        for method in ("get", "post", "patch", "delete"):
            if method in item:
                assert f"{method.upper()} {path}" in page, f"{method.upper()} {path} is missing from the API reference"


def test_the_mcp_page_lists_every_tool(site):
    from docs.hooks.mcp_tools import mcp_tools

    page = _text(site / "mcp" / "index.html")
    names = [name for name, _, _ in mcp_tools()]
    assert "history" in names and "remember" in names
    assert all(name in page for name in names)


def test_the_readme_is_a_guide_under_400_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) < 400


def test_no_page_reads_as_a_work_diary():
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [f"{page.relative_to(ROOT)}: {match.group(0)!r}" for page in pages
             for match in DIARY.finditer(page.read_text())]
    assert found == []


def test_every_link_of_the_readme_to_a_file_of_the_repository_resolves():
    readme = (ROOT / "README.md").read_text()
    targets = [t.split("#", 1)[0] for t in re.findall(r"\]\(([^)\s]+)\)", readme) if not re.match(r"[a-z]+:", t)]
    assert targets, "the README links to the docs"
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_every_source_file_the_docs_name_exists():
    """A page that walks the code names its files; a file renamed or deleted must take the page along."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    named = {path for page in pages
             for path in re.findall(r"`((?:app|domain|ports|adapters|tests|bench|examples|client)/[\w/.-]+\.(?:py|md|toml))`",
                                    page.read_text())}
    assert named, "the docs name the files they describe"
    assert sorted(path for path in named if not (ROOT / path).exists()) == []
