"""`DELETE /v1/speech/{id}?played_ms=…`: the playback position is a finite number ≥ 0, and
anything else is the client's mistake (400), never the server's (500)."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.conftest import ACME

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("played_ms", ["nan", "NaN", "inf", "-inf", "1e999", "-1", "soon"])
async def test_a_position_that_is_not_a_finite_number_is_refused(gateway_url: str, played_ms: str) -> None:
    async with httpx.AsyncClient(base_url=gateway_url, headers=ACME, timeout=30) as client:
        accepted = await client.post("/v1/speech", json={"text": "Hello.", "voice": "en_joe"})
        assert accepted.status_code == 202, accepted.text
        status_url = accepted.json()["status_url"]
        refused = await client.delete(status_url, params={"played_ms": played_ms})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "invalid_request"
        # Nothing was cancelled: the request is still queued, and a valid position still stops it.
        assert (await client.get(status_url)).json()["status"] == "queued"
        stop = await client.delete(status_url, params={"played_ms": "250.5"})
        assert stop.status_code == 202 and stop.json()["cancelled"] is True, stop.text
