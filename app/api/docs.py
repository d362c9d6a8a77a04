"""API documentation served offline, and the root page.

Swagger UI's JavaScript and CSS come from the ``fastapi-swagger`` package
(which ships the current Swagger UI release), served under
``/docs/assets``, so ``/docs`` works without internet access; FastAPI's
documented self-hosting builds the page. ``/`` redirects to ``/docs``, or
answers a small JSON index when the documentation is turned off
(``PRIORWATCH_DOCS_ENABLED=false``: no ``/docs``, no ``/openapi.json``).
ReDoc is not served (no package ships it).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.staticfiles import StaticFiles

DOCS_URL = "/docs"
OPENAPI_URL = "/openapi.json"
ASSETS_URL = "/docs/assets"


def swagger_assets() -> Path:
    """The directory holding swagger-ui-bundle.js, swagger-ui.css and the favicon."""
    return Path(str(files("fastapi_swagger") / "resources"))


def install_docs(app: FastAPI, *, enabled: bool) -> None:
    """Add ``/docs`` (self-hosted Swagger UI) and ``/``; give ``FastAPI`` no docs URLs."""
    if not enabled:

        @app.get("/", include_in_schema=False)
        async def index() -> dict[str, Any]:
            return {
                "service": app.title,
                "version": app.version,
                "docs": "turned off (PRIORWATCH_DOCS_ENABLED=false)",
                "health": "/healthz",
            }

        return

    app.mount(ASSETS_URL, StaticFiles(directory=swagger_assets()), name="docs-assets")

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=root + OPENAPI_URL,
            title=f"{app.title} - API",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon-32x32.png",
        )

    @app.get("/", include_in_schema=False)
    async def root(request: Request) -> Response:
        return RedirectResponse(request.scope.get("root_path", "").rstrip("/") + DOCS_URL)
