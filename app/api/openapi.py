"""OpenAPI for routes that parse their JSON body themselves (large arrays).

FastAPI documents only bodies it validates; :func:`raw_json_body` describes a
raw body with a pydantic model (documentation only) and examples, and
:func:`register_documented_schemas` adds those models to the components.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

_REF = "#/components/schemas/{model}"
_DOCUMENTED: list[type[BaseModel]] = []


def raw_json_body(model: type[BaseModel], examples: dict[str, Any]) -> dict[str, Any]:
    """``openapi_extra`` for a route whose JSON body is described by ``model``."""
    if model not in _DOCUMENTED:
        _DOCUMENTED.append(model)
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {"$ref": _REF.format(model=model.__name__)},
                    "examples": examples,
                }
            },
        }
    }


def register_documented_schemas(app: FastAPI) -> None:
    """Make ``app.openapi()`` include the schemas referenced by :func:`raw_json_body`."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in _DOCUMENTED:
            definition = model.model_json_schema(ref_template=_REF)
            components.update(definition.pop("$defs", {}))
            components[model.__name__] = definition
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
