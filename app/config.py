"""One settings object for the whole service (pydantic-settings).

Every value comes from the environment with the ``PRIORWATCH_`` prefix (a
``.env`` file in the working directory may supply it), e.g.
``PRIORWATCH_DATABASE_URL`` or ``PRIORWATCH_MAX_BATCH_ROWS``.
:func:`get_settings` builds it once per process; tests build their own
:class:`Settings` and pass it to ``create_app``.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import timedelta
from functools import lru_cache

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

#: Admin tokens that are refused because they are known placeholders.
PLACEHOLDER_SECRETS = frozenset(
    {"changeme", "change-me", "change_me", "secret", "admin", "password", "token", "test"}
)
#: Shortest admin or metrics token accepted (characters); also the shortest piece
#: that a token may repeat (see :func:`check_token_strength`).
MIN_ADMIN_TOKEN_LENGTH = 16
#: Least entropy of a token, in bits, estimated from its character frequencies.
MIN_TOKEN_ENTROPY_BITS = 32.0
_MIN_REPEAT = 4
"""Characters a piece must be written again for the token to count as a repetition
(a random token often ends with its own first character or two)."""


def settings_config(env_prefix: str) -> SettingsConfigDict:
    """How every settings class of the service reads its values.

    From the environment variables named ``env_prefix`` + the field name (any
    case), or a ``.env`` file in the working directory; unknown variables are
    ignored, the object is frozen once built, and validation errors never
    show the refused value (it may be a secret).
    """
    return SettingsConfigDict(
        env_prefix=env_prefix,
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        frozen=True,
        hide_input_in_errors=True,  # a refused value may be a secret: never echo it
    )


class Settings(BaseSettings):
    """Service configuration; see docs/api.md ("Limits") for what each limit guards."""

    model_config = settings_config("PRIORWATCH_")

    database_url: str = Field(
        default="sqlite:///./priorwatch.db",
        description="SQLAlchemy URL: sqlite:///path or postgresql+psycopg://user@host/db "
        "(postgres:// and postgresql:// mean the latter)",
    )
    admin_token: SecretStr | None = Field(
        default=None,
        description="bearer token with admin scope; admin calls are refused while unset",
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        description="when set, GET /metrics requires it as a bearer token (Prometheus)",
    )
    metrics_exposition: str = Field(
        default="compact",
        description="GET /metrics series per window: 'compact' (what the shipped dashboard "
        "and rules read), 'full', or a comma-separated list of families to write whole "
        "(docs/reading.md; checked when the app is created)",
    )
    docs_enabled: bool = Field(
        default=True,
        description="serve the API documentation (/docs and /openapi.json)",
    )

    # --- request limits -------------------------------------------------
    max_body_bytes: int = Field(
        default=64 * 1024 * 1024,
        gt=0,
        description="largest accepted request body in bytes (413 above it)",
    )
    evaluate_max_body_bytes: int = Field(
        default=8 * 1024 * 1024,
        gt=0,
        description="largest accepted /v1/evaluate body in bytes (unauthenticated; 413 above it)",
    )
    evaluate_max_concurrency: int = Field(
        default=2,
        gt=0,
        description="/v1/evaluate calls computed at once; more get 429 with Retry-After",
    )
    max_batch_rows: int = Field(
        default=1_000_000,
        gt=0,
        description="most rows (scores) in one batch or one /v1/evaluate call",
    )
    backfill_max_age_days: float = Field(
        default=30.0,
        gt=0,
        description="oldest accepted batch timestamp, in days before now",
    )
    max_unfolded_deltas: int = Field(
        default=10_000,
        ge=0,
        description="most batches of one model waiting for a worker to fold them (unfolded "
        "all-traffic deltas); past it a batch gets 429 with Retry-After; 0: no bound",
    )
    future_skew_seconds: float = Field(
        default=300.0,
        ge=0,
        description="how far in the future a batch timestamp may be (client clock skew)",
    )

    # --- connections (docs/operations.md, "Slow clients") ---------------
    header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="a connection that has not sent a request's complete headers this long "
        "after it opened, or after the request's first byte, is closed",
    )
    keep_alive_seconds: int = Field(
        default=5,
        gt=0,
        description="an idle keep-alive connection is closed after this long",
    )
    body_timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        description="a request body not complete this long after its headers gets 408",
    )

    # --- database -------------------------------------------------------
    sqlite_busy_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="how long a SQLite writer waits for the database lock",
    )
    database_pool_size: int = Field(
        default=10, gt=0, description="connections kept per process (Postgres)"
    )
    database_connect_timeout_seconds: float = Field(
        default=5.0, gt=0, description="longest wait for a new connection (Postgres)"
    )
    database_pool_timeout_seconds: float = Field(
        default=5.0, gt=0, description="longest wait for a free connection of the pool"
    )
    database_statement_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="server-side limit of one statement (Postgres statement_timeout)",
    )
    database_lock_timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        description="server-side limit of one wait for a row lock (Postgres lock_timeout)",
    )
    database_retry_after_seconds: int = Field(
        default=5, gt=0, description="Retry-After of the 503 answered while the database is down"
    )
    request_deadline_seconds: float = Field(
        default=8.0,
        gt=0,
        description="a request with no answer this long after the end of its body read "
        "gets 503 (database not answering)",
    )

    # --- embedded mode --------------------------------------------------
    embedded_worker: bool = Field(
        default=True,
        description="on SQLite, `priorwatch serve` also runs the worker in-process",
    )

    @field_validator("database_url")
    @classmethod
    def _psycopg_url(cls, value: str) -> str:
        return normalise_database_url(value)

    @field_validator("admin_token", "metrics_token")
    @classmethod
    def _refuse_placeholder_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        token = value.get_secret_value()
        if token == "":
            return None  # PRIORWATCH_ADMIN_TOKEN= (empty) means "not set"; same for metrics
        return check_token_strength(value)

    @property
    def is_sqlite(self) -> bool:
        """True when the database is a SQLite file (embedded mode)."""
        return self.database_url.startswith("sqlite")

    @property
    def backfill_max_age(self) -> timedelta:
        return timedelta(days=self.backfill_max_age_days)

    @property
    def future_skew(self) -> timedelta:
        return timedelta(seconds=self.future_skew_seconds)


_SQLITE_DRIVERS = ("sqlite", "sqlite+pysqlite")
_POSTGRES_DRIVERS = ("postgres", "postgresql", "postgres+psycopg", "postgresql+psycopg")
_URL_FORMS = "use sqlite:///path or postgresql://user:password@host:port/database"


def normalise_database_url(database_url: str) -> str:
    """``database_url`` with a PostgreSQL scheme as users write it (``postgres://``,
    ``postgresql://``) given the driver the service uses (``postgresql+psycopg://``).

    ValueError (never quoting the URL: it may hold a password) for anything
    that is not a SQLite or PostgreSQL URL.
    """
    try:
        url = make_url(database_url)
    except ArgumentError:
        raise ValueError(f"is not a database URL; {_URL_FORMS}") from None
    if url.drivername in _SQLITE_DRIVERS:
        return database_url
    if url.drivername not in _POSTGRES_DRIVERS:
        raise ValueError(f"names the unsupported driver {url.drivername!r}; {_URL_FORMS}")
    if url.drivername == "postgresql+psycopg":
        return database_url
    return url.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def masked_url(database_url: str) -> str:
    """``database_url`` as shown in every message and log line: password as ``***``."""
    return make_url(database_url).render_as_string(hide_password=True)


def check_token_strength(value: SecretStr) -> SecretStr:
    """``value`` if it can serve as a bearer secret, else ValueError (never quoting it).

    Refused: known placeholders; fewer than :data:`MIN_ADMIN_TOKEN_LENGTH`
    characters; a piece of fewer than :data:`MIN_ADMIN_TOKEN_LENGTH`
    characters written again after itself (``changemechangeme``,
    ``abcabcabc...``, one character repeated; a copy may be cut short); less
    than :data:`MIN_TOKEN_ENTROPY_BITS` of entropy, estimated as the length
    times the entropy of the token's character frequencies (``aaaaaaaaaaaaaaab``).
    """
    token = value.get_secret_value()
    if token.strip().lower() in PLACEHOLDER_SECRETS:
        raise ValueError("is a known placeholder; set a random value")
    if len(token) < MIN_ADMIN_TOKEN_LENGTH:
        raise ValueError(f"must have at least {MIN_ADMIN_TOKEN_LENGTH} characters")
    period = _shortest_period(token)
    if period < MIN_ADMIN_TOKEN_LENGTH and len(token) - period >= _MIN_REPEAT:
        raise ValueError("repeats a short piece; set a random value")
    if _entropy_bits(token) < MIN_TOKEN_ENTROPY_BITS:
        raise ValueError("is too predictable (too few different characters); set a random value")
    return value


def _shortest_period(text: str) -> int:
    """The least p such that ``text[i] == text[i + p]`` for every i (``len(text)`` if none),
    from the prefix function (Knuth-Morris-Pratt): p = length - longest border."""
    border = [0] * len(text)
    for i in range(1, len(text)):
        k = border[i - 1]
        while k and text[i] != text[k]:
            k = border[k - 1]
        border[i] = k + 1 if text[i] == text[k] else 0
    return len(text) - border[-1]


def _entropy_bits(text: str) -> float:
    """``len(text)`` times the Shannon entropy (bits) of its character frequencies."""
    n = len(text)
    return -sum(c * math.log2(c / n) for c in Counter(text).values())


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment once."""
    return Settings()
