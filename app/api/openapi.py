"""The OpenAPI document: raw-body routes and the problem+json error responses.

FastAPI documents only bodies it validates; :func:`raw_json_body` describes a
raw body with a pydantic model (documentation only) and examples, and
:func:`register_documented_schemas` adds those models to the components.

Every error response is ``application/problem+json`` (:class:`Problem`);
:func:`declare_problems` states, per operation, the error statuses it can
answer. tests/integration/test_api_fuzz.py holds every response to this
document.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from app.api.schemas import Problem

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
        models: list[type[BaseModel]] = [*_DOCUMENTED, Problem]
        for model in models:
            definition = model.model_json_schema(ref_template=_REF)
            components.update(definition.pop("$defs", {}))
            components[model.__name__] = definition
        declare_problems(schema)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _error_statuses(path: str, operation: dict[str, Any]) -> set[int]:
    """The error statuses any operation like this one can answer."""
    statuses = {500, 503}  # unexpected error; database unavailable
    if "requestBody" in operation:
        statuses |= {400, 413, 415, 422}  # malformed, too large, not JSON or bad encoding
    if operation.get("parameters"):
        statuses.add(422)
    if operation.get("security"):
        statuses.add(401)
        if path != "/metrics":
            statuses.add(403)
    if "{" in path:
        statuses.add(404)
    return statuses


def declare_problems(schema: dict[str, Any]) -> None:
    """Document every error status of every operation as problem+json."""
    problem = {"application/problem+json": {"schema": {"$ref": _REF.format(model="Problem")}}}
    for path, item in schema.get("paths", {}).items():
        for operation in item.values():
            responses = operation.setdefault("responses", {})
            for status in _error_statuses(path, operation):
                responses.setdefault(str(status), {"description": HTTPStatus(status).phrase})
            for code, response in responses.items():
                if code.isdigit() and int(code) >= 400:
                    response["content"] = problem
