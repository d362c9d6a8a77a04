"""Every error response is ``application/problem+json`` (RFC 9457).

Body: ``{"type", "title", "status", "detail", "instance", "errors": [{"field",
"reason"}]}``. ``type`` is ``about:blank`` for plain HTTP conditions (unknown
route, wrong method) and ``urn:priorwatch:problem:<slug>`` for the service's
own conditions (listed in docs/api.md). A database outage (unreachable,
timed out, busy) is a 503 ``database-unavailable`` with ``Retry-After`` and one
log line. Unhandled exceptions become a 500 without internals
(app/api/guard.py); the traceback goes to the server log only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from app.db.availability import describe_outage, is_outage
from app.errors import (
    PROBLEM_PREFIX,
    ApiKeyNotFound,
    IdempotencyKeyReused,
    InvalidInput,
    MalformedBody,
    ModelAlreadyExists,
    ModelNotFound,
    PriorwatchError,
    RequestInFlight,
    TooManyUnfoldedDeltas,
)
from app.services.ingest.json_keys import DuplicateKey

log = logging.getLogger("priorwatch.api")

PROBLEM_JSON = "application/problem+json"


def problem_type(slug: str) -> str:
    return PROBLEM_PREFIX + slug


class ProblemError(StarletteHTTPException):
    """An HTTP error with its own problem type; raised by dependencies and middleware.

    It subclasses Starlette's HTTPException so that FastAPI re-raises it
    unchanged even while it reads the request body.
    """

    def __init__(
        self,
        status_code: int,
        slug: str,
        detail: str,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(status_code=status_code, detail=detail, headers=dict(headers or {}))
        self.slug = slug


def not_authenticated(detail: str) -> ProblemError:
    return ProblemError(401, "not-authenticated", detail, headers={"WWW-Authenticate": "Bearer"})


def permission_denied(detail: str) -> ProblemError:
    return ProblemError(403, "permission-denied", detail)


ADMIN_DISABLED = "admin calls are disabled until PRIORWATCH_ADMIN_TOKEN is set"


def admin_disabled() -> ProblemError:
    return ProblemError(403, "admin-disabled", ADMIN_DISABLED)


def body_too_large(limit: int) -> ProblemError:
    return ProblemError(413, "body-too-large", f"the request body exceeds {limit} bytes")


def unsupported_media_type(got: str | None) -> ProblemError:
    return ProblemError(
        415, "unsupported-media-type", f"send Content-Type: application/json (got {got!r})"
    )


# status and problem slug of each domain error
_DOMAIN: dict[type[PriorwatchError], tuple[int, str]] = {
    ModelNotFound: (404, "model-not-found"),
    ApiKeyNotFound: (404, "api-key-not-found"),
    ModelAlreadyExists: (409, "model-exists"),
    MalformedBody: (400, "malformed-json"),
    IdempotencyKeyReused: (422, "idempotency-key-reused"),
    RequestInFlight: (409, "request-in-flight"),
    TooManyUnfoldedDeltas: (429, "too-many-unfolded-deltas"),
}


def problem_response(
    status: int,
    *,
    type_: str = "about:blank",
    title: str | None = None,
    detail: str | None = None,
    instance: str | None = None,
    errors: Iterable[tuple[str, str]] = (),
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A problem+json response; ``errors`` are (field, reason) pairs."""
    body: dict[str, Any] = {
        "type": type_,
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": instance,
        "errors": [{"field": f, "reason": r} for f, r in errors],
    }
    return Response(
        orjson.dumps(body), status_code=status, media_type=PROBLEM_JSON, headers=dict(headers or {})
    )


def _instance(request: Request) -> str:
    return request.url.path


async def _invalid_input(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, InvalidInput)
    slug = "duplicate-key" if isinstance(exc, DuplicateKey) else "invalid-input"
    return problem_response(
        422,
        type_=problem_type(slug),
        title="Invalid input",
        detail=str(exc),
        instance=_instance(request),
        errors=[(exc.field, exc.reason)],
    )


async def _domain_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, PriorwatchError)
    status, slug = next(v for k, v in _DOMAIN.items() if isinstance(exc, k))
    headers = {}
    if isinstance(exc, RequestInFlight | TooManyUnfoldedDeltas):
        headers["Retry-After"] = str(exc.retry_after_seconds)
    return problem_response(
        status,
        type_=problem_type(slug),
        detail=exc.detail,
        instance=_instance(request),
        headers=headers,
    )


def _field_of(loc: Iterable[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in {"body", "query", "path", "header"}:
        parts = parts[1:] or parts
    return ".".join(parts) or "body"


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        reason = next(str(e.get("ctx", {}).get("error", "")) for e in errors)
        return problem_response(
            400,
            type_=problem_type("malformed-json"),
            detail=f"the body is not valid JSON: {reason}",
            instance=_instance(request),
        )
    pairs = [(_field_of(e.get("loc", ())), str(e.get("msg", "invalid"))) for e in errors]
    return problem_response(
        422,
        type_=problem_type("invalid-input"),
        title="Invalid input",
        detail="; ".join(f"{f}: {r}" for f, r in pairs),
        instance=_instance(request),
        errors=pairs,
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    slug = getattr(exc, "slug", None)
    detail = exc.detail if isinstance(exc.detail, str) else None
    if exc.status_code == 413 and slug is None:  # Starlette/FastAPI's own body limit
        slug = "body-too-large"
    if exc.status_code == 400 and slug is None:  # FastAPI could not decode the JSON body
        slug = "malformed-json"
        detail = f"the body is not valid JSON: {_cause(exc)}"
    return problem_response(
        exc.status_code,
        type_=problem_type(slug) if slug else "about:blank",
        detail=detail,
        instance=_instance(request),
        headers=exc.headers,
    )


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__
    if isinstance(cause, UnicodeDecodeError):
        return f"invalid UTF-8 at byte {cause.start}"
    return "it could not be decoded"


def internal_error_response(instance: str | None) -> Response:
    """The 500 answer to a bug (nothing about it is shown to the client)."""
    return problem_response(
        500,
        type_=problem_type("internal-error"),
        detail="an unexpected error occurred; it has been logged",
        instance=instance,
    )


def unavailable_response(
    detail: str, *, instance: str | None, retry_after_seconds: int
) -> Response:
    """The 503 answer while the database is unreachable or does not answer in time."""
    return problem_response(
        503,
        type_=problem_type("database-unavailable"),
        title="Database unavailable",
        detail=f"{detail}; retry later",
        instance=instance,
        headers={"Retry-After": str(retry_after_seconds)},
    )


async def _database_error(request: Request, exc: Exception) -> Response:
    if not is_outage(exc):
        raise exc  # a bug: the guard middleware logs it and answers 500
    log.warning(
        "database unavailable on %s %s: %s", request.method, request.url.path, describe_outage(exc)
    )
    return unavailable_response(
        "the database is unavailable",
        instance=_instance(request),
        retry_after_seconds=request.app.state.settings.database_retry_after_seconds,
    )


def register_exception_handlers(app: FastAPI) -> None:
    """Route every error to a problem+json response (bugs: app/api/guard.py)."""
    app.add_exception_handler(InvalidInput, _invalid_input)
    app.add_exception_handler(PriorwatchError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(sa_exc.DBAPIError, _database_error)
    app.add_exception_handler(sa_exc.TimeoutError, _database_error)
