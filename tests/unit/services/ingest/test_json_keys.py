"""app.services.ingest.json_keys: repeated keys found at any depth, large arrays never walked."""

from __future__ import annotations

import pytest

from app.services.ingest.json_keys import DuplicateKey, check_unique_keys
from app.services.ingest.parse import load_document


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (b'{"a": 1, "a": 1}', "a"),
        (b'{"a": {"b": 1, "c": {"d": 0, "d": 0}}}', "a.c.d"),
        (b'{"sla": [{"metric": "x"}, {"metric": "x", "op": ">=", "metric": "y"}]}', "sla.1.metric"),
        (b'{"a": [[1, 2], [{"k": 1, "k": 2}]]}', "a.1.0.k"),
        (b'{"s": "{ {", "a": 1, "a": 2}', "a"),
        # beyond 64 bits: simdjson declines, the standard library checks instead
        (b'{"a": 18446744073709551616, "a": 1}', "a"),
        (b'{"\\u0000": {"b": 1}, "c": 1, "c": 2}', "c"),  # simdjson cannot look "\0" up
    ],
)
def test_duplicates_are_named_by_path(body: bytes, path: str) -> None:
    with pytest.raises(DuplicateKey) as caught:
        check_unique_keys(body)
    assert caught.value.field == path and caught.value.reason == "duplicate key"


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": 1, "b": {"a": 1}}',
        b'{"sla": [{"metric": "x"}, {"metric": "y"}], "x": [1, 2.5, -3]}',
        b'{"a": "{\\"a\\": 1, \\"a\\": 2}"}',  # a string holding JSON is not an object
        b"[]",
        b'{"labels": [true, false], "scores": [0.1, 0.2]}',
        b'{"a": 18446744073709551616, "b": {"a": 1}}',
        b'{"\\u0000": {"b": 1}}',
    ],
)
def test_distinct_keys_pass(body: bytes) -> None:
    check_unique_keys(body)


def test_both_parsers_refuse_the_same_body() -> None:
    fast = b'{"scores": [0.1, 0.9], "labels": [0, 1], "labels": [1, 0]}'  # simdjson's form
    general = b'{"scores": [0.1, 0.9], "labels": [0, 1], "labels": [true, false]}'
    for body in (fast, general):
        with pytest.raises(DuplicateKey, match="labels"):
            load_document(body)
    distinct = load_document(b'{"scores": [0.1, 0.9], "labels": [0, 1]}')
    assert list(distinct["labels"]) == [0, 1]
