"""API keys of a model: create (token shown once), list, revoke, resolve a token.

Tokens are ``pw_`` + 43 URL-safe characters (256 random bits). Only their
SHA-256 is stored: a database leak does not leak usable tokens, and a random
256-bit token needs no slow hash.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db import queries
from app.db.models import ApiKey, Model
from app.db.session import write_transaction
from app.errors import ApiKeyNotFound, ModelNotFound
from app.services.models.auth_cache import AUTH_CACHE

TOKEN_PREFIX = "pw_"
DISPLAY_PREFIX_LENGTH = 10
"""Characters of the token kept in clear (``prefix``) to tell keys apart."""
SCOPES = ("ingest", "read")


def hash_token(token: str) -> str:
    """Hex SHA-256 of a bearer token."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def create_key(
    session: Session, model: Model, scopes: Sequence[str], now: datetime
) -> tuple[ApiKey, str]:
    """Store a new key of ``model`` and commit; returns the row and the clear token."""
    token = new_token()
    model_id, name = model.id, model.name  # read before the transaction may expire them
    try:
        with write_transaction(session):
            key = _new_key(model_id, token, scopes, now)
            session.add(key)
    except IntegrityError:  # its model was deleted meanwhile
        raise ModelNotFound(f"no model named {name!r}") from None
    return key, token


def _new_key(model_id: int, token: str, scopes: Sequence[str], now: datetime) -> ApiKey:
    return ApiKey(
        model_id=model_id,
        id=uuid.uuid4(),
        token_hash=hash_token(token),
        prefix=token[:DISPLAY_PREFIX_LENGTH],
        scopes=[s for s in SCOPES if s in scopes],
        created_at=now,
        revoked_at=None,
    )


def list_keys(session: Session, model: Model) -> Sequence[ApiKey]:
    return queries.list_api_keys(session, model.id)


def revoke_key(session: Session, model: Model, key_id: str, now: datetime) -> ApiKey:
    """Mark the key revoked (idempotent: the first revocation time is kept) and commit."""
    try:
        parsed = uuid.UUID(key_id)
    except ValueError:
        raise ApiKeyNotFound(f"no key {key_id!r} for model {model.name!r}") from None
    with write_transaction(session):
        key = queries.get_api_key(session, model.id, parsed)
        if key is None:
            raise ApiKeyNotFound(f"no key {key_id!r} for model {model.name!r}")
        if key.revoked_at is None:
            key.revoked_at = now
    AUTH_CACHE.clear()  # after the commit: a lookup racing with it cannot re-cache the key
    return key


def find_active_key(session: Session, token: str) -> ApiKey | None:
    """The unrevoked key whose token is ``token``, or None."""
    key = queries.find_api_key_by_hash(session, hash_token(token))
    if key is None or key.revoked_at is not None:
        return None
    return key
