"""Request dependencies as typed aliases: settings, session, caller, model by scope.

Authentication: ``Authorization: Bearer <token>``. The admin token
(PRIORWATCH_ADMIN_TOKEN) may do everything; a model key acts on its own model
only, within its scopes. No or unknown token -> 401; a known token without
the right -> 403. Admin calls are refused (403 ``admin-disabled``) while no admin
token is set, whatever token they carry.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.api.errors import (
    admin_disabled,
    not_authenticated,
    permission_denied,
    unsupported_media_type,
)
from app.config import Settings
from app.db.models import ApiKey, Model
from app.errors import InvalidInput
from app.services.ingest.idempotency import HEADER as IDEMPOTENCY_HEADER
from app.services.ingest.json_keys import check_unique_keys
from app.services.models import api_keys as keys
from app.services.models.registry import get_model
from app.services.models.settings import SLUG_PATTERN


async def get_app_settings(request: Request) -> Settings:
    # async: trivial dependencies run on the event loop, not in the thread pool
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_app_settings)]


def get_session(request: Request) -> Iterator[Session]:
    """One session per request; services commit, the session is closed (rolled back) here,
    when the handler returns: its connection is back in the pool before the response is
    sent (a client slow to read it holds none)."""
    session: Session = request.app.state.session_factory()
    try:
        yield session
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session, scope="function")]

ModelName = Annotated[
    str,
    Path(
        pattern=SLUG_PATTERN,
        description="the model's name: lowercase letters, digits, '-' and '_', at most 64",
        examples=["fraud"],
    ),
]
"""The ``{name}`` of a path, checked as a body's model name is (422 naming ``name``)
before anything is looked up; every route with a model name in its path takes it."""

_bearer = HTTPBearer(
    auto_error=False,
    description="the admin token (PRIORWATCH_ADMIN_TOKEN) or a model key (pw_...)",
)


@dataclass(frozen=True)
class Caller:
    """Who is calling: the admin, or the holder of one model key."""

    admin: bool
    key: ApiKey | None = None


def bearer_token(credentials: HTTPAuthorizationCredentials | None) -> str:
    """The bearer token of the request (401 without one)."""
    if credentials is None or not credentials.credentials:
        raise not_authenticated("send Authorization: Bearer <token>")
    return credentials.credentials


def is_admin_token(token: str, settings: Settings) -> bool:
    """Whether ``token`` is the admin token (never while none is set)."""
    admin = settings.admin_token
    return admin is not None and hmac.compare_digest(
        token.encode(), admin.get_secret_value().encode()
    )


def get_caller(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    session: SessionDep,
    settings: SettingsDep,
) -> Caller:
    token = bearer_token(credentials)
    if is_admin_token(token, settings):
        return Caller(admin=True)
    return Caller(admin=False, key=active_key(session, token))


def active_key(session: Session, token: str) -> ApiKey:
    """The unrevoked key whose token is ``token`` (401 otherwise)."""
    key = keys.find_active_key(session, token)
    if key is None:
        raise not_authenticated("unknown or revoked token")
    return key


CallerDep = Annotated[Caller, Depends(get_caller)]


def require_admin(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    session: SessionDep,
    settings: SettingsDep,
) -> Caller:
    if settings.admin_token is None:  # whatever the token: say why, not "unknown token"
        raise admin_disabled()
    caller = get_caller(credentials, session, settings)
    if caller.admin:
        return caller
    raise permission_denied("this call needs the admin token")


AdminDep = Annotated[Caller, Depends(require_admin)]


def model_with_scope(*scopes: str) -> Callable[..., Model]:
    """A dependency loading the path's model for a caller holding one of ``scopes``."""

    def dependency(name: ModelName, caller: CallerDep, session: SessionDep) -> Model:
        model = get_model(session, name)
        if caller.admin:
            return model
        assert caller.key is not None
        check_key_rights(caller.key.model_id, caller.key.scopes, model.id, name, scopes)
        return model

    return dependency


def check_key_rights(
    key_model_id: int,
    key_scopes: Collection[str],
    model_id: int,
    name: str,
    scopes: Collection[str],
) -> None:
    """403 unless a key of model ``key_model_id`` with ``key_scopes`` may act on
    model ``model_id`` (named ``name``) with one of ``scopes``."""
    if key_model_id != model_id:
        raise permission_denied(f"this key does not belong to model {name!r}")
    if not set(scopes) & set(key_scopes):
        raise permission_denied(f"this key lacks the {' or '.join(scopes)} scope")


def admin_model(name: ModelName, _admin: AdminDep, session: SessionDep) -> Model:
    return get_model(session, name)


AdminModelDep = Annotated[Model, Depends(admin_model)]
"""The path's model, for the admin."""
ReadModelDep = Annotated[Model, Depends(model_with_scope("read"))]
"""The path's model, for the admin or a key with the read scope."""
AnyScopeModelDep = Annotated[Model, Depends(model_with_scope("read", "ingest"))]
"""The path's model, for the admin or any key of it (settings and bins)."""


def is_json_content_type(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` header value names JSON (``application/json``, ``+json``)."""
    if not content_type:
        return False
    mime = content_type.split(";", 1)[0].strip().lower()
    main, _, sub = mime.partition("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


async def require_json(request: Request) -> None:
    """415 unless the request declares a JSON body."""
    content_type = request.headers.get("content-type")
    if not is_json_content_type(content_type):
        raise unsupported_media_type(content_type)


JsonBody = Depends(require_json)
"""Add to ``dependencies=[...]`` of every route that takes a JSON body."""


async def require_unique_keys(request: Request) -> None:
    """422 ``duplicate-key`` when the (already parsed, small) JSON body repeats a key."""
    check_unique_keys(await request.body())


UniqueKeys = Depends(require_unique_keys)
"""Add to routes whose body pydantic validates (the raw-body routes check it themselves)."""

BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
"""The bearer token of the request, if any (for routes that resolve the caller themselves)."""


async def bearer_credentials(request: Request) -> HTTPAuthorizationCredentials | None:
    """What :data:`BearerCredentials` resolves to, read without FastAPI's dependency
    resolution (the batch route's fast path, app/api/routes/batches.py)."""
    return await _bearer(request)


async def idempotency_key(
    values: Annotated[
        list[str] | None,
        Header(
            alias=IDEMPOTENCY_HEADER,
            description='1-255 visible ASCII characters, sent once; see docs/api.md "Idempotency"',
        ),
    ] = None,
) -> str | None:
    """The request's Idempotency-Key, or None; 422 naming the header when it comes
    more than once (which one the client meant is not for the service to guess)."""
    if values is not None and len(values) > 1:
        raise InvalidInput(IDEMPOTENCY_HEADER, f"is sent {len(values)} times; send it once")
    return values[0] if values else None


IdempotencyKey = Annotated[str | None, Depends(idempotency_key)]
"""The Idempotency-Key header of a batch (checked further by the ingestion)."""
