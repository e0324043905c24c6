"""Property-based fuzzing of the OpenAPI document (schemathesis) against the live gateway and
the real pipeline: every generated request must get a documented, non-5xx answer."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from streamtts.gateway.settings import GatewaySettings

pytestmark = [pytest.mark.integration, pytest.mark.model]
EXAMPLES = 12  # per operation: ~10 operations in < 60 s on 2 shared cores


@pytest.fixture
def gateway_settings(gateway_settings: GatewaySettings) -> GatewaySettings:
    # Short texts keep generated requests cheap to synthesize (the limit is in the document).
    return replace(gateway_settings, max_text_chars=60, request_timeout_s=45.0)


def _fuzz(base_url: str) -> list[str]:
    import schemathesis

    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    auth = {"Authorization": "Bearer key-acme"}
    seen: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def check(case) -> None:  # type: ignore[no-untyped-def]
            response = case.call(base_url=base_url, headers=auth, timeout=60)
            assert response.status_code < 500, (
                case.method,
                case.path,
                response.status_code,
                response.text[:300],
            )
            case.validate_response(response, headers=auth)

        check()
        seen.append(operation.label)
    return seen


async def test_openapi_document_fuzzed_without_server_errors(live_gateway_url: str) -> None:
    # Requests are synchronous; run them off the loop that serves the gateway and the pipeline.
    seen = await asyncio.to_thread(_fuzz, live_gateway_url)
    assert "POST /v1/speech" in seen and "POST /v1/audio/speech" in seen and len(seen) >= 9
