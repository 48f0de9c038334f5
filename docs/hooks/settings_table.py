"""mkdocs hook: the configuration table, generated from ``app.config.Settings`` at build time.

A page that contains the marker ``<!-- settings-table -->`` gets, in its place, one row per
setting: the environment variable, its default, what values it takes (bounds and choices are read
from the field's type) and its description. The table cannot drift from the code: a setting added
to ``Settings`` appears on the next build, a removed one disappears.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MARKER = "<!-- settings-table -->"

# What an unset variable means where the answer depends on other settings (the code says it with
# None). A name here that Settings does not declare fails the build, so this cannot go stale either.
UNSET_MEANS = {
    "SQLITE_PATH": "required by `serve` (`make run` sets `./data/memory.db`); other commands use `./data/memory.db`",
    "QDRANT_URL": "unset: embedded Qdrant Edge under `QDRANT_PATH`",
    "QDRANT_PATH": "`<SQLITE_PATH>.qdrant`",
    "EMBEDDING_MODEL": "`all-MiniLM-L6-v2` in process, `nomic-embed-text` otherwise",
    "EMBEDDING_DIM": "the embedder's own (384 for MiniLM, 768 for the HTTP and hashing embedders)",
    "FORWARDED_ALLOW_IPS": "unset: proxy headers are ignored",
    "CORS_ORIGINS": "unset: no browser origin allowed",
}

# Descriptions of the settings whose declaration carries none (plain ``str`` fields).
DESCRIBED_HERE = {
    "EMBEDDING_SERVICE_URL": "the NexusAI embedding service (`POST /embed`); setting it alone selects it",
    "OLLAMA_URL": "Ollama (`POST /api/embed`), for `EMBEDDER=ollama`",
    "OPENAI_BASE_URL": "any OpenAI-compatible server (`POST /v1/embeddings`): vLLM, llama.cpp, LM Studio, TEI, OpenAI",
    "OPENAI_API_KEY": "the key sent to the OpenAI-compatible server",
    "MEMORY_API_KEY": "when set, every route but the health probes and the docs pages needs `Authorization: Bearer <key>`",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _takes(kind: Any) -> str:
    """The values a field accepts, from its msgspec type: choices, bounds, or the base type."""
    import msgspec

    bounds: list[str] = []
    while True:
        if isinstance(kind, msgspec.inspect.Metadata):
            kind = kind.type
        elif isinstance(kind, msgspec.inspect.UnionType):
            kind = next(t for t in kind.types if not isinstance(t, msgspec.inspect.NoneType))
        else:
            break
    if isinstance(kind, msgspec.inspect.LiteralType):
        return ", ".join(f"`{value}`" for value in kind.values)
    for attr, op in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
        value = getattr(kind, attr, None)
        if value is not None:
            bounds.append(f"{op} {value}")
    word = {
        msgspec.inspect.IntType: "integer",
        msgspec.inspect.FloatType: "number",
        msgspec.inspect.BoolType: "`true` / `false`",
        msgspec.inspect.StrType: "text",
        msgspec.inspect.DictType: "a family of variables",
        msgspec.inspect.TupleType: "comma-separated list",
        msgspec.inspect.VarTupleType: "comma-separated list",
    }.get(type(kind), "text")
    return word + (f" ({', '.join(bounds)})" if bounds else "")


def _description(kind: Any) -> str:
    import msgspec

    while True:
        if isinstance(kind, msgspec.inspect.Metadata):
            if kind.extra_json_schema and kind.extra_json_schema.get("description"):
                return kind.extra_json_schema["description"]
            kind = kind.type
        elif isinstance(kind, msgspec.inspect.UnionType):
            inner = [t for t in kind.types if not isinstance(t, msgspec.inspect.NoneType)]
            if len(inner) != 1:
                return ""
            kind = inner[0]
        else:
            return ""


def settings_rows() -> list[tuple[str, str, str, str]]:
    """(variable, default, accepted values, description) for every field of ``Settings``."""
    import msgspec

    from app import config

    declared = {f.encode_name for f in msgspec.inspect.type_info(config.Settings).fields}
    unknown = (set(UNSET_MEANS) | set(DESCRIBED_HERE)) - declared
    if unknown:
        raise RuntimeError(f"docs/hooks/settings_table.py explains settings the code does not declare: {unknown}")
    derived = {name: (follows, value) for name, follows, value in getattr(config, "_DERIVED_DEFAULTS", ())}
    rows = []
    for info in msgspec.inspect.type_info(config.Settings).fields:
        name = info.encode_name
        if info.required:
            default = UNSET_MEANS.get(name, "required")
        else:
            value = info.default_factory() if info.default is msgspec.NODEFAULT else info.default
            if value is None or value == () or value == {}:
                default = UNSET_MEANS.get(name, "unset")
            elif isinstance(value, bool):
                default = f"`{str(value).lower()}`"
            else:
                default = f"`{value}`"
        if name in derived:
            follows, other = derived[name]
            default += f"; `{other}` when `{follows}` is set"
        rows.append((name, default, _takes(info.type), _description(info.type) or DESCRIBED_HERE.get(name, "")))
    return rows


def settings_table() -> str:
    lines = ["| variable | default | takes | meaning |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {_cell(default)} | {_cell(takes)} | {_cell(meaning)} |"
              for name, default, takes, meaning in settings_rows()]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, settings_table())
    return markdown
