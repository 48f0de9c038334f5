"""mkdocs hook: the API reference, rendered from the service's own OpenAPI schema at build time.

A page that contains the marker ``<!-- openapi-reference -->`` gets, in its place, every route the
app serves: method and path, summary and description, parameters, request body and answers, then
every body schema with its fields. The app is built with in-memory adapters only (no file, no
model, no network), so the build is quick and the page always matches the routes.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MARKER = "<!-- openapi-reference -->"
METHODS = ("get", "post", "put", "patch", "delete")


def openapi_schema() -> dict:
    from app.config import Settings
    from app.main import create_app

    settings = Settings(sqlite_path=":memory:", store="memory", vector_index="memory", embedder="hash",
                        worker_enabled=False)
    # Framework deprecation notices belong to the test suite's output, not to the docs build's.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_app(settings).openapi_schema.to_schema()


def _text(text: Any) -> str:
    """Schema prose as Markdown text: angle brackets shown, not read as HTML tags."""
    return str(text or "").replace("<", "&lt;").replace(">", "&gt;")


def _cell(text: Any) -> str:
    return _text(text).replace("|", "\\|").replace("\n", " ").strip()


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _anchor(name: str) -> str:
    return "schema-" + name.lower()


def _type(schema: dict) -> str:
    """A short, readable type for a JSON schema: links for components, unions joined by ``or``."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    for key in ("oneOf", "anyOf", "allOf"):
        if key in schema:
            return " or ".join(dict.fromkeys(_type(s) for s in schema[key]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    fmt = schema.get("format")
    return f"{kind} ({fmt})" if kind and fmt else (kind or "any")


def _limits(schema: dict) -> str:
    parts = []
    for key, word in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"),
                      ("minLength", "length ≥"), ("maxLength", "length ≤"), ("minItems", "items ≥"),
                      ("maxItems", "items ≤")):
        if key in schema:
            parts.append(f"{word} {_number(schema[key])}")
    return ", ".join(parts)


def _operation(method: str, path: str, op: dict) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        lines += [_text(op["summary"]), ""]
    if op.get("description"):
        lines += [_text(op["description"].strip()), ""]
    params = op.get("parameters") or []
    if params:
        lines += ["| parameter | in | type | required | notes |", "|---|---|---|---|---|"]
        for p in params:
            schema = p.get("schema", {})
            notes = "; ".join(x for x in (p.get("description"), _limits(schema),
                                          f"default `{schema['default']}`" if "default" in schema else "") if x)
            lines.append(f"| `{p['name']}` | {p.get('in', '')} | {_type(schema)} | "
                         f"{'yes' if p.get('required') else 'no'} | {_cell(notes)} |")
        lines.append("")
    body = op.get("requestBody")
    if body:
        for media, content in body.get("content", {}).items():
            lines += [f"Body (`{media}`): {_type(content.get('schema', {}))}", ""]
    answers = op.get("responses") or {}
    if answers:
        lines += ["| status | answer |", "|---|---|"]
        for status, answer in sorted(answers.items()):
            shapes = [_type(c.get("schema", {})) for c in (answer.get("content") or {}).values()]
            text = _cell(answer.get("description"))
            lines.append(f"| {status} | {text}{' — ' + ', '.join(shapes) if shapes else ''} |")
        lines.append("")
    return lines


def _component(name: str, schema: dict) -> list[str]:
    lines = [f"### {name} {{#{_anchor(name)}}}", ""]
    if schema.get("description"):
        lines += [_text(schema["description"].strip()), ""]
    properties = schema.get("properties") or {}
    if not properties:
        return lines + [f"Type: {_type(schema)}", ""]
    required = set(schema.get("required") or ())
    lines += ["| field | type | required | notes |", "|---|---|---|---|"]
    for field, spec in properties.items():
        notes = "; ".join(x for x in (spec.get("description"), _limits(spec)) if x)
        lines.append(f"| `{field}` | {_type(spec)} | {'yes' if field in required else 'no'} | {_cell(notes)} |")
    return lines + [""]


def reference(schema: dict) -> str:
    by_tag: dict[str, list[tuple[str, str, dict]]] = {}
    for path, item in schema.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                op = item[method]
                tag = (op.get("tags") or [path.strip("/").split("/", 1)[0] or "service"])[0]
                by_tag.setdefault(tag, []).append((method, path, op))
    lines: list[str] = []
    for tag in sorted(by_tag):
        lines += [f"## {tag.capitalize()}", ""]
        for method, path, op in sorted(by_tag[tag], key=lambda r: (r[1], METHODS.index(r[0]))):
            lines += _operation(method, path, op)
    components = schema.get("components", {}).get("schemas", {})
    if components:
        lines += ["## Bodies and answers", ""]
        for name in sorted(components):
            lines += _component(name, components[name])
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, reference(openapi_schema()))
    return markdown
