"""Settings: contract defaults, environment and .env, refused placeholder secrets."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.config import Settings, get_settings, masked_url


def test_contract_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    for var in ("PRIORWATCH_DATABASE_URL", "PRIORWATCH_ADMIN_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    s = Settings()
    assert s.database_url == "sqlite:///./priorwatch.db" and s.is_sqlite
    assert s.admin_token is None
    assert s.backfill_max_age.days == 30 and s.future_skew.total_seconds() == 300


def test_environment_and_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(
        "PRIORWATCH_DATABASE_URL=postgresql+psycopg://u@h/db\nPRIORWATCH_MAX_BATCH_ROWS=7\n"
    )
    monkeypatch.setenv("PRIORWATCH_ADMIN_TOKEN", "s3cr3t-from-the-environment")
    monkeypatch.setenv("PRIORWATCH_MAX_BATCH_ROWS", "9")  # environment beats .env
    s = Settings()
    assert s.database_url == "postgresql+psycopg://u@h/db" and not s.is_sqlite
    assert s.admin_token is not None
    assert s.admin_token.get_secret_value() == "s3cr3t-from-the-environment"
    assert "s3cr3t" not in repr(s)
    assert s.max_batch_rows == 9


@pytest.mark.parametrize(
    "token",
    [
        "changeme",
        "secret",
        "too-short",
        " " * 24,
        "\t\n" * 12,
        "a" * 32,
        "7" * 64,
        "changemechangeme",  # a placeholder written twice
        "changeme-changem",  # a short piece repeated, the last copy cut short
        "abcabcabcabcabcabc",
        "aaaaaaaaaaaaaaab",  # few different characters: too little entropy
        "0000000011111111",
    ],
)
def test_placeholder_short_blank_and_repeated_admin_tokens_are_refused(
    token: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(ValidationError, match="admin_token") as caught:
        Settings(_env_file=None, admin_token=token)  # type: ignore[call-arg]
    assert token not in str(caught.value)  # the refusal never echoes the secret
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIORWATCH_ADMIN_TOKEN", token)
    with pytest.raises(ValidationError) as from_env:
        Settings()
    assert token not in str(from_env.value)


@pytest.mark.parametrize(
    "token",
    [
        "test-admin-token-0123456789abcdef",  # the tests' token (tests/conftest.py)
        "0123456789abcdef",  # 16 different characters
        "9f86d081884c7d659a2feaa0c55ad015",  # hex: its first pair comes back once
        "abcdefghijklmnopabcd",  # the piece written again has 16 characters
    ],
)
def test_random_looking_tokens_are_accepted(token: str) -> None:
    settings = Settings(_env_file=None, admin_token=token, metrics_token=token)  # type: ignore[call-arg]
    assert settings.admin_token is not None and settings.metrics_token is not None
    assert settings.admin_token.get_secret_value() == token


def test_empty_admin_token_means_unset() -> None:
    assert Settings(_env_file=None, admin_token="").admin_token is None  # type: ignore[call-arg]


@pytest.mark.parametrize("field", ["max_body_bytes", "max_batch_rows", "backfill_max_age_days"])
def test_limits_must_be_positive(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        Settings(_env_file=None, **{field: 0})  # type: ignore[call-arg]


def test_get_settings_is_cached() -> None:
    assert get_settings() is get_settings()


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("postgres://u:pw@h:5432/db", "postgresql+psycopg://u:pw@h:5432/db"),
        ("postgresql://u@h/db?sslmode=require", "postgresql+psycopg://u@h/db?sslmode=require"),
        ("postgres+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql+psycopg://u:p%40ss@h/db", "postgresql+psycopg://u:p%40ss@h/db"),
        ("sqlite:///./x.db", "sqlite:///./x.db"),
    ],
)
def test_postgres_urls_as_users_write_them_use_psycopg(given: str, used: str) -> None:
    assert Settings(_env_file=None, database_url=given).database_url == used  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("postgresql+psycopg2://u:pw@h/db", "unsupported driver 'postgresql+psycopg2'"),
        ("mysql://u:pw@h/db", "unsupported driver 'mysql'"),
        ("not a url", "is not a database URL"),
    ],
)
def test_other_database_urls_are_refused_without_quoting_them(url: str, reason: str) -> None:
    with pytest.raises(ValidationError, match="database_url") as caught:
        Settings(_env_file=None, database_url=url)  # type: ignore[call-arg]
    assert reason in str(caught.value) and "pw" not in str(caught.value)


def test_masked_url_hides_the_password() -> None:
    shown = masked_url("postgresql+psycopg://postgres:S3cretPw@db:5432/priorwatch")
    assert shown == "postgresql+psycopg://postgres:***@db:5432/priorwatch"
