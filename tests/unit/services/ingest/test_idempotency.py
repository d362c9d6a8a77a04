"""Idempotency helpers: key validation, lock ids, in-flight registry, replay check."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from app.db.models import Batch
from app.errors import IdempotencyKeyReused, InvalidInput, RequestInFlight
from app.services.ingest.idempotency import (
    InFlightRegistry,
    advisory_lock_id,
    check_idempotency_key,
    replay_response,
    request_hash,
)


@pytest.mark.parametrize("key", ["a", "order-42/retry:1", "x" * 255, "6f1c…".encode().hex()])
def test_good_keys(key: str) -> None:
    assert check_idempotency_key(key) == key


@pytest.mark.parametrize("key", ["", "x" * 256, "has space", "tab\t", "é"])
def test_bad_keys(key: str) -> None:
    with pytest.raises(InvalidInput) as info:
        check_idempotency_key(key)
    assert info.value.field == "Idempotency-Key"


def test_a_key_character_is_accepted_if_and_only_if_it_is_visible_ascii() -> None:
    for code in range(0x2100):
        try:
            accepted = check_idempotency_key(f"k{chr(code)}k") is not None
        except InvalidInput:
            accepted = False
        assert accepted == (33 <= code <= 126), hex(code)


def test_missing_key_is_allowed() -> None:
    assert check_idempotency_key(None) is None


def test_advisory_lock_ids() -> None:
    ids = {advisory_lock_id(m, k) for m in range(1, 50) for k in ("a", "b", "ab", "1")}
    assert len(ids) == 49 * 4  # distinct across models and keys
    assert all(-(2**63) <= i < 2**63 for i in ids)
    assert advisory_lock_id(3, "k") == advisory_lock_id(3, "k")
    assert advisory_lock_id(1, "2\x003") != advisory_lock_id(12, "3")


def test_registry_refuses_a_second_holder_and_releases() -> None:
    registry = InFlightRegistry()
    with registry.hold("db", 1, "k"):
        assert registry.is_held("db", 1, "k")
        with pytest.raises(RequestInFlight), registry.hold("db", 1, "k"):
            pass
        with registry.hold("db", 2, "k"), registry.hold("other-db", 1, "k"):
            pass
    assert not registry.is_held("db", 1, "k")
    with pytest.raises(ValueError), registry.hold("db", 1, "k"):
        raise ValueError("the request failed")
    assert not registry.is_held("db", 1, "k")


def test_replay_needs_the_same_body() -> None:
    body = b'{"timestamp": "2026-11-26T10:00:00Z", "scores": [0.5], "labels": [1]}'
    response = {"batch_id": "b", "window_start": "2026-11-26T10:00:00Z", "count": 1}
    batch = Batch(
        model_id=1,
        id=uuid.uuid4(),
        idempotency_key="k",
        request_hash=request_hash(body),
        kind="scores",
        event_at=datetime.now(UTC),
        window_start=datetime.now(UTC),
        n=1,
        positives=1,
        response=response,
        received_at=datetime.now(UTC),
    )
    assert replay_response(batch, request_hash(body)) == response
    with pytest.raises(IdempotencyKeyReused):
        replay_response(batch, request_hash(body.replace(b"0.5", b"0.6")))
    assert request_hash(b"a") != request_hash(b"a ")  # byte-for-byte
