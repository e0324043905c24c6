"""Retention at the gateway: audio and captions past the result's `expires_at` are 410 Gone
(the store's lifecycle scanner deletes them later), as is stored audio that vanished."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from streamtts.runtime.s3 import make_minio
from tests.gateway.conftest import ACME
from tests.gateway.served import Served, complete, submit

pytestmark = pytest.mark.integration


async def test_expired_audio_and_captions_are_gone(served: Served) -> None:
    past = datetime.now(UTC) - timedelta(seconds=1)
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
        rid = await submit(client)
        await complete(served, rid, "acme", captions=True, expires_at=past)
        status = (await client.get(f"/v1/speech/{rid}?wait=20", headers=ACME)).json()
        assert status["status"] == "completed" and datetime.fromisoformat(status["expires_at"]) == past
        audio = await client.get(f"/v1/speech/{rid}/audio", headers=ACME)
        assert audio.status_code == 410 and audio.json()["error"]["code"] == "expired"
        assert "the tenant's retention" in audio.json()["error"]["message"]
        captions = await client.get(f"/v1/speech/{rid}/captions?format=srt", headers=ACME)
        assert captions.status_code == 410 and captions.json()["error"]["code"] == "expired"

        # Not expired yet: served (the same objects are still in the store).
        fresh = await submit(client)
        await complete(served, fresh, "acme", expires_at=datetime.now(UTC) + timedelta(days=30))
        assert (await client.get(f"/v1/speech/{fresh}?wait=20", headers=ACME)).json()["status"] == "completed"
        assert (await client.get(f"/v1/speech/{fresh}/audio", headers=ACME)).status_code == 200
    read = await served.events(action="audio_read", request_id=rid)
    assert [(e.outcome, e.status) for e in read] == [("expired", 410)]


async def test_stored_audio_that_vanished_is_gone_not_a_storage_error(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
        rid = await submit(client)
        await complete(served, rid, "acme")
        status = (await client.get(f"/v1/speech/{rid}?wait=20", headers=ACME)).json()
        assert status["expires_at"] is None
        # Deleted behind the result's back (a lifecycle rule ran, or an operator removed it).
        s3 = make_minio(served.s3, connect_s=3, read_s=10, retries=1, pool=2)
        s3.remove_object(status["storage"]["bucket"], status["storage"]["key"])
        gone = await client.get(f"/v1/speech/{rid}/audio", headers=ACME)
        assert gone.status_code == 410 and gone.json()["error"]["code"] == "gone"


async def test_an_expired_request_out_of_the_gateways_reach_is_gone_by_its_marker(served: Served) -> None:
    """No result anywhere the gateway searches (older than its lookback): the sink's expiry
    marker still says the request existed and expired → 410, for this tenant only."""
    from streamtts.features.retention.policy import expiry_marker_key
    from streamtts.sinks.object_store import ObjectStore

    store = ObjectStore(served.s3)
    old, future = "req-from-last-year", "req-kept-longer"
    past = datetime.now(UTC) - timedelta(days=200)
    store.put_marker(
        expiry_marker_key("acme", old), {"expires-at": past.isoformat(), "key": f"acme/{old}.mp3"}
    )
    later = datetime.now(UTC) + timedelta(days=5)
    store.put_marker(expiry_marker_key("acme", future), {"expires-at": later.isoformat(), "key": "x"})
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
        for path in (f"/v1/speech/{old}", f"/v1/speech/{old}/audio", f"/v1/speech/{old}/captions"):
            gone = await client.get(path, headers=ACME)
            assert gone.status_code == 410 and gone.json()["error"]["code"] == "expired", path
        # Another tenant asking for acme's id learns nothing: its own markers only.
        other = await client.get(f"/v1/speech/{old}/audio", headers={"X-API-Key": "key-globex"})
        assert other.status_code == 404
        # Not expired yet (and no result): still unknown here.
        assert (await client.get(f"/v1/speech/{future}/audio", headers=ACME)).status_code == 404
