"""``priorwatch serve`` on a never-migrated embedded database: one command, no 500."""

from __future__ import annotations

import httpx
from _e2e_support import (
    ADMIN_TOKEN,
    HTTP_TIMEOUT,
    Processes,
    assert_server_stopped_cleanly,
    first_readyz_status,
    free_port,
    process_env,
)


def test_serve_prepares_a_fresh_sqlite_database(processes: Processes) -> None:
    path = processes.workdir / "fresh.db"
    env = process_env(f"sqlite:///{path}")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = processes.start("serve", ["serve", "--port", str(port)], env)
    # ready at the first answer: the schema was prepared before the port opened
    assert first_readyz_status(base, processes) == 200
    with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT) as http:
        r = http.post(
            "/v1/models",
            json={"name": "fraud", "pi0": 0.1},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert r.status_code == 201, r.text
    assert "migrated to head (was at nothing)" in server.log_path.read_text()
    assert_server_stopped_cleanly(server)
