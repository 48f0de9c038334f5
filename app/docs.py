"""The docs UI, served offline: Swagger UI's files come from the ``swagger-ui-bundle-v2`` package
and are served by the service itself under ``/schema/assets/`` (Litestar's default fetches them
from a CDN, which leaves a blank page without network). With ``MEMORY_API_KEY`` set the schema
declares the bearer scheme, so the UI shows an Authorize button.

The docs pages and their assets are open paths: a browser cannot send the key before the page
that asks for it has loaded, and the API's description is not a secret.
"""

from __future__ import annotations

from collections.abc import Collection

from litestar import Litestar, get
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.exceptions import NotFoundException
from litestar.response import File
from swagger_ui_bundle import swagger_ui_path

from app.config import Settings

SCHEMA_PATH = "/schema"
ASSETS_PATH = f"{SCHEMA_PATH}/assets"
ASSET_TYPES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui-standalone-preset.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}
DOCS_PATHS = frozenset({SCHEMA_PATH, f"{SCHEMA_PATH}/swagger", f"{SCHEMA_PATH}/openapi.json",
                        f"{SCHEMA_PATH}/oauth2-redirect.html", *(f"{ASSETS_PATH}/{name}" for name in ASSET_TYPES)})
BEARER = "bearerAuth"


@get(f"{ASSETS_PATH}/{{name:str}}", include_in_schema=False, sync_to_thread=False)
def docs_asset(name: str) -> File:
    """One of Swagger UI's files, from the installed package (404 for anything else)."""
    if name not in ASSET_TYPES:
        raise NotFoundException(f"no docs asset named {name!r}")
    return File(path=swagger_ui_path / name, media_type=ASSET_TYPES[name], content_disposition_type="inline",
                headers={"cache-control": "public, max-age=86400"})


def openapi_config(settings: Settings) -> OpenAPIConfig:
    """Swagger UI at ``/schema`` and ``/schema/swagger`` with local assets; the bearer scheme when a
    key is configured."""
    swagger = SwaggerRenderPlugin(
        js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js", css_url=f"{ASSETS_PATH}/swagger-ui.css",
        standalone_preset_js_url=f"{ASSETS_PATH}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{ASSETS_PATH}/favicon-32x32.png'>",
        path=["/", "/swagger"],
    )
    secured = settings.memory_api_key is not None
    return OpenAPIConfig(
        title="NexusAI Memory Service", version="0.1.0", path=SCHEMA_PATH, render_plugins=[swagger],
        components=Components(security_schemes={BEARER: SecurityScheme(
            type="http", scheme="bearer", description="MEMORY_API_KEY, sent as 'Authorization: Bearer <key>'",
        )}) if secured else Components(),
        security=[{BEARER: []}] if secured else None,
    )


def open_operations(app: Litestar, open_paths: Collection[str]) -> None:
    """Mark the operations of ``open_paths`` (health) as needing no key in the schema: an empty
    ``security`` list overrides the document-wide bearer requirement."""
    if not app.openapi_config or not app.openapi_config.security:
        return
    for path, item in (app.openapi_schema.paths or {}).items():
        if path in open_paths:
            for method in ("get", "head", "post"):
                operation = getattr(item, method, None)
                if operation is not None:
                    operation.security = []
