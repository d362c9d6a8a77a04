"""The throwaway-database helper reports an unreachable server before creating anything."""

from __future__ import annotations

import pytest

from app.db.scratch import ServerUnavailable, scratch_postgres_database


def test_unreachable_server_raises_before_yielding() -> None:
    entered = False
    url = "postgresql+psycopg://postgres@127.0.0.1:1/x"
    with pytest.raises(ServerUnavailable) as err, scratch_postgres_database("t", url):
        entered = True
    assert not entered
    assert err.value.reason and "\n" not in err.value.reason
