"""Duplicate keys in a JSON object are refused, on every route and every parser.

JSON parsers disagree on ``{"labels": [...], "labels": [...]}`` (simdjson
reads the first value, orjson and the standard library the last), so the
service refuses such a body with :class:`DuplicateKey` naming the key (its
path, e.g. ``histogram.positives``) instead of picking one.

The check walks simdjson's document, which keeps every key as written:
object keys only (a set per object, no Python work per array element), and
it looks inside arrays only when the body holds more ``{`` than the objects
it met outside them, i.e. when objects inside arrays may exist. Large
numeric arrays are therefore never iterated in Python.
"""

from __future__ import annotations

import json
from typing import Any

import simdjson

from app.errors import InvalidInput


class DuplicateKey(InvalidInput):
    """A JSON object of the body names the same key twice; ``field`` is its path."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "duplicate key")


def duplicated_key(keys: list[str], path: str = "") -> str | None:
    """The path of the first key of ``keys`` seen before, or None."""
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            return path + key
        seen.add(key)
    return None


def check_unique_keys(body: bytes) -> None:
    """Raise :class:`DuplicateKey` if any object of the JSON ``body`` repeats a key.

    ``body`` must already be known to be valid JSON (the caller parsed it).
    """
    try:
        doc = simdjson.Parser().parse(body)
        counted = [0]
        found = _walk(doc, "", counted, into_arrays=False)
        if found is None and body.count(b"{") > counted[0]:
            found = _walk(doc, "", [0], into_arrays=True)
    except (ValueError, RuntimeError, KeyError):
        # valid JSON that simdjson refuses (an integer beyond 64 bits) or cannot look
        # up (a key holding U+0000): the standard library decides, more slowly
        json.loads(body, object_pairs_hook=_refuse_duplicates)
        return
    if found is not None:
        raise DuplicateKey(found)


def _walk(value: Any, path: str, counted: list[int], *, into_arrays: bool) -> str | None:
    if isinstance(value, simdjson.Object):
        counted[0] += 1
        keys = list(value.keys())
        found = duplicated_key(keys, path)
        for key in keys:
            if found is not None:
                break
            found = _walk(value[key], f"{path}{key}.", counted, into_arrays=into_arrays)
        return found
    if into_arrays and isinstance(value, simdjson.Array):
        try:
            value.as_buffer(of_type="d")  # numbers only (in C): nothing to look into
            return None
        except (ValueError, TypeError, RuntimeError):
            pass
        for index, item in enumerate(value):
            found = _walk(item, f"{path}{index}.", counted, into_arrays=True)
            if found is not None:
                return found
    return None


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = duplicated_key([key for key, _ in pairs])
    if found is not None:
        raise DuplicateKey(found)  # the key alone: the standard library gives no path
    return dict(pairs)
