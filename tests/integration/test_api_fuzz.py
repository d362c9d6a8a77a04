"""Fuzz the whole OpenAPI surface with schemathesis (the app in-process, SQLite).

Every operation gets a bounded number of generated requests (seeded:
``derandomize``), valid and invalid, as the admin; the path parameter
``name`` points at a registered model so that requests reach the routes' own
logic. No response may be a 5xx, and every response must match its declared
status code, content type, headers and schema (problem+json included).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode

from app.main import create_app

EXAMPLES_PER_OPERATION = 30
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_headers_conformance,
    schemathesis.checks.response_schema_conformance,
]


@pytest.fixture
def fuzz_app(
    sqlite_url: str, settings_for: Callable[..., Any], admin_headers: dict[str, str]
) -> Any:
    app = create_app(settings_for(sqlite_url))
    with TestClient(app) as client:
        r = client.post("/v1/models", json={"name": "m", "pi0": 0.1}, headers=admin_headers)
        assert r.status_code == 201, r.text
    return app


def test_no_5xx_and_every_response_matches_the_schema(
    fuzz_app: Any, admin_headers: dict[str, str]
) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzz_app)
    failures: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14  # every route of the API is fuzzed
    for operation in operations:

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            derandomize=True,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],  # report as found: no shrinking
            suppress_health_check=list(HealthCheck),
        )
        @given(
            case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
            | operation.as_strategy(generation_mode=GenerationMode.NEGATIVE)
        )
        def fuzz(case: Any) -> None:
            if "name" in (case.path_parameters or {}):
                case.path_parameters["name"] = "m"
            case.call_and_validate(headers=dict(admin_headers), checks=CHECKS)

        try:
            fuzz()
        except (Exception, BaseExceptionGroup) as exc:  # collect every operation's failures
            failures[operation.label] = str(exc)[:2000]
    assert not failures, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
