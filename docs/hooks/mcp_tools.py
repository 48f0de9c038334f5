"""mkdocs hook: the MCP tool table, generated from the MCP server the service builds.

A page that contains the marker ``<!-- mcp-tools -->`` gets, in its place, one row per tool the
server registers: its name, its arguments (required ones in bold) and its own description — the
text an assistant reads. A tool added to ``app/mcp_server.py`` appears on the next build.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MARKER = "<!-- mcp-tools -->"


def mcp_tools() -> list[tuple[str, list[tuple[str, bool]], str]]:
    """(name, [(argument, required)], description) for every tool, in registration order."""
    from app.config import Settings
    from app.container import build_container
    from app.mcp_server import build_server

    settings = Settings(sqlite_path=":memory:", store="memory", vector_index="memory", embedder="hash",
                        worker_enabled=False)
    server = build_server(build_container(settings))
    rows = []
    for tool in asyncio.run(server.list_tools()):
        schema = tool.input_schema or {}
        required = set(schema.get("required") or ())
        arguments = [(name, name in required) for name in schema.get("properties", {})]
        rows.append((tool.name, arguments, " ".join((tool.description or "").split())))
    return rows


def tools_table() -> str:
    lines = ["| tool | arguments (required in bold) | what it does |", "|---|---|---|"]
    for name, arguments, description in mcp_tools():
        args = ", ".join(f"**`{a}`**" if required else f"`{a}`" for a, required in arguments)
        text = description.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
        lines.append(f"| `{name}` | {args} | {text} |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, tools_table())
    return markdown
