"""Barge-in that silences the line (issue #29), with a real `websockets` client acting like a
telephony bridge behind an LLM, and over HTTP framed audio, against Kafka and the pipeline.

What the caller gets after a cancel is at most what was already written to the socket (the
gateway drops every frame it still holds and every queued sentence, finished or not);
"what was spoken" in the cancel event and in the result on tts.results is the audio the
client received; the next reply starts about as fast as the first.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import orjson
import pytest
import websockets
from aiokafka import TopicPartition

from streamtts.runtime.kafka import make_consumer, topic_partitions
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import CompletionResult
from tests.gateway.conftest import ACME

pytestmark = [pytest.mark.integration, pytest.mark.model]

FRAME_MS = 20
FRAME_BYTES = 160  # 20 ms of 8 kHz μ-law
REPLY = (
    "Thanks for waiting, I have found your booking for tomorrow. "
    "Your flight leaves at nine fifteen in the morning from terminal two. "
    "Boarding starts forty minutes before departure, so please come early. "
    "You can check in online from twenty four hours before the flight. "
)
NEXT = "Of course, let me change that for you. "


async def _tokens(ws: Any, text: str, marks: dict[str, float], per_s: float = 40.0) -> None:
    """Send `text` word by word at LLM speed; `marks["first_token"]`: when its first word was
    sent, `marks["sentence_end"]`: when its first sentence was complete."""
    for word in text.split(" "):
        if not word:
            continue
        await ws.send(orjson.dumps({"type": "text", "text": word + " "}).decode())
        marks.setdefault("first_token", time.monotonic())
        if "sentence_end" not in marks and word.endswith((".", "!", "?")):
            marks["sentence_end"] = time.monotonic()
        await asyncio.sleep(1 / per_s)  # the pace of an LLM's tokens, not a wait for an event


async def _result(
    kafka: KafkaSettings, request_id: str, status: str, timeout_s: float = 60
) -> CompletionResult:
    """The first result of `request_id` on tts.results with `status` (corrections included)."""
    topic = TopicNames(kafka.topic_prefix).results
    consumer = make_consumer(kafka, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(await topic_partitions(kafka, topic))]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        async with asyncio.timeout(timeout_s):
            while True:
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    for record in records:
                        if record.key == request_id.encode():
                            result = CompletionResult.from_bytes(record.value)
                            if result.status == status:
                                return result
    finally:
        await consumer.stop()


async def test_websocket_cancel_silences_the_line_and_says_what_was_heard(
    live_gateway_url: str, kafka_settings: KafkaSettings
) -> None:
    for pace in ("realtime", "fast"):  # one pipeline for both: its start is most of the time
        await _websocket_barge_in(live_gateway_url, kafka_settings, pace)


async def _websocket_barge_in(live_gateway_url: str, kafka_settings: KafkaSettings, pace: str) -> None:
    url = live_gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    start = {
        "type": "start",
        "voice": "en_joe",
        "format": "mulaw",
        "frame_ms": FRAME_MS,
        "pace": pace,
        "frames": "media",
        "timestamps": True,
    }
    media = 0  # frames received
    words: list[tuple[str, float]] = []  # (text, session start) of every word announced
    async with asyncio.timeout(90), websockets.connect(url, max_size=None) as ws:
        await ws.send(orjson.dumps(start).decode())
        marks: dict[str, float] = {}
        llm = asyncio.create_task(_tokens(ws, REPLY, marks))
        first_frame_after: float | None = None
        # 1. The reply plays; barge in after 0.5 s of audio.
        while media < 25:
            event = orjson.loads(await ws.recv())
            if event.get("event") == "media":
                media += 1
                if first_frame_after is None:
                    first_frame_after = time.monotonic()
            elif event.get("type") == "words":
                words += [(w["text"], event["session_offset_ms"] + w["start_ms"]) for w in event["words"]]
        llm.cancel()  # the caller speaks: the agent stops writing this reply
        await ws.send(orjson.dumps({"type": "cancel"}).decode())
        cancel_sent, at_cancel = time.monotonic(), media
        trip_ms = 0.0
        # 2. Until `cancelled`: only frames that were on the wire already.
        cleared = False
        while True:
            event = orjson.loads(await ws.recv())
            if event.get("event") == "media":
                media += 1
            elif event.get("type") == "words":
                words += [(w["text"], event["session_offset_ms"] + w["start_ms"]) for w in event["words"]]
            elif event.get("event") == "clear":
                cleared = True
            elif event.get("type") == "cancelled":
                cancelled, trip_ms = event, (time.monotonic() - cancel_sent) * 1000
                break
        # 3. The next reply, at once; nothing of the cancelled one comes before it.
        next_sent = time.monotonic()
        await ws.send(orjson.dumps({"type": "text", "text": NEXT}).decode())
        leaked = 0
        while True:
            event = orjson.loads(await ws.recv())
            if event.get("event") == "media":
                leaked += 1
            elif event.get("type") == "started":
                break
        next_start: float | None = None  # the next reply's place on the session clock
        while True:
            event = orjson.loads(await ws.recv())
            if event.get("type") == "words" and next_start is None:
                next_start = event["session_offset_ms"] - event["offset_ms"]
            if event.get("event") == "media":
                next_first = time.monotonic() - next_sent
                break
        played: float | None = None
        if pace == "fast":
            # Fast pacing writes the whole reply at once: the bridge still plays it from its
            # buffer when the caller barges in at `played` (300 ms into it).
            while (event := orjson.loads(await ws.recv())).get("type") != "completed":
                if event.get("type") == "words" and next_start is None:
                    next_start = event["session_offset_ms"] - event["offset_ms"]
            assert next_start is not None
            played = next_start + 300
        # 4. A second barge-in cuts only the new reply: the first one's sentences are closed.
        await ws.send(orjson.dumps({"type": "cancel", **({"played_ms": played} if played else {})}).decode())
        cleared_again = False
        while (event := orjson.loads(await ws.recv())).get("type") != "cancelled":
            cleared_again = cleared_again or event.get("event") == "clear"
        again = event
        await ws.send(orjson.dumps({"type": "end"}).decode())
        while orjson.loads(await ws.recv()).get("type") != "done":
            pass
    first_cut = {r["request_id"] for r in cancelled["requests"]}
    assert not first_cut & {r["request_id"] for r in again["requests"]}, again
    assert again["requests"], again
    # The line goes silent either way: a reply all written (fast) is still in the bridge's buffer.
    assert cleared_again, "media mode: a clear event at every barge-in"
    if played is not None:  # heard: the 300 ms it played, in the event and on tts.results
        [entry] = again["requests"]
        assert again["request_ids"] == [entry["request_id"]], again
        assert entry["spoken_ms"] == pytest.approx(300, abs=FRAME_MS), entry
        result = await _result(kafka_settings, entry["request_id"], "cancelled")
        assert result.spoken_ms == pytest.approx(300, abs=FRAME_MS), result
    received_ms = media * FRAME_MS
    after_cancel_ms = (media - at_cancel) * FRAME_MS
    assert first_frame_after is not None
    # A turn is one streamed utterance: its first clause may be heard before its sentence ends.
    first_reply = first_frame_after - marks["first_token"]
    print(
        f"pace {pace}: {media} frames before the stop, {after_cancel_ms} ms after the cancel was sent, "
        f"stopped at {cancelled['position_ms']} ms, spoken {cancelled['spoken_ms']} ms; "
        f"cancel → cancelled {(next_sent - cancel_sent) * 1000:.0f} ms; next reply's first frame "
        f"{next_first * 1000:.0f} ms after its text (first reply: "
        f"{first_reply * 1000:.0f} ms after its first token)"
    )
    assert cleared, "media mode: a clear event before resuming"
    assert leaked == 0, "no frame of the cancelled reply after `cancelled`"
    # Everything received was on the wire when the gateway stopped: at most one frame beyond.
    assert received_ms <= cancelled["position_ms"] + FRAME_MS, (received_ms, cancelled)
    if pace == "realtime":  # paced: only what the cancel's trip took, no burst of held frames
        assert after_cancel_ms <= max(60.0, trip_ms + FRAME_MS), (after_cancel_ms, trip_ms)
    # What was spoken is what the client received (no played_ms sent: all it got).
    assert abs(cancelled["spoken_ms"] - received_ms) <= FRAME_MS, (cancelled, received_ms)
    heard_words = [text for text, at in words if at < cancelled["position_ms"]]
    assert [w["text"] for w in cancelled["words_spoken"]] == heard_words
    # The result on tts.results says the same, per request.
    for entry in cancelled["requests"]:
        result = await _result(kafka_settings, entry["request_id"], "cancelled")
        assert abs((result.spoken_ms or 0.0) - entry["spoken_ms"]) <= FRAME_MS, (result, entry)
        assert [w.text for w in result.words_spoken or []] == [w["text"] for w in entry["words_spoken"]]
    assert sum(e["spoken_ms"] for e in cancelled["requests"]) == pytest.approx(cancelled["spoken_ms"], abs=1)
    # The next reply is not held back by the cancelled one's leftovers (generous bound).
    assert next_first < 5.0, next_first


async def test_http_framed_audio_stops_at_delete(
    live_gateway_url: str, kafka_settings: KafkaSettings
) -> None:
    for pace in ("realtime", "fast"):
        await _http_barge_in(live_gateway_url, kafka_settings, pace)


async def _http_barge_in(live_gateway_url: str, kafka_settings: KafkaSettings, pace: str) -> None:
    async with httpx.AsyncClient(base_url=live_gateway_url, headers=ACME, timeout=60) as client:
        resp = await client.post(
            "/v1/speech",
            json={"text": REPLY, "voice": "en_joe", "format": "mulaw", "timestamps": True},
        )
        assert resp.status_code == 202, resp.text
        accepted = resp.json()
        params = {"frame_ms": FRAME_MS, "pace": pace}
        received = 0
        async with client.stream("GET", accepted["audio_url"], params=params) as audio:
            pieces = audio.aiter_bytes()
            while received < 25 * FRAME_BYTES:
                received += len(await anext(pieces))
            at_cancel, cancel_sent = received, time.monotonic()

            async def rest() -> tuple[int, float]:
                n = sum([len(p) async for p in pieces])  # the stream ends, not hangs
                return n, time.monotonic()

            reader = asyncio.create_task(rest())
            stop = await client.delete(accepted["status_url"], params={"wait": 10})
            more, ended = await reader
            received += more
    body = stop.json()
    received_ms = received / FRAME_BYTES * FRAME_MS
    after_ms = (received - at_cancel) / FRAME_BYTES * FRAME_MS
    trip_ms = (ended - cancel_sent) * 1000  # the DELETE's way to the gateway, and the stop
    print(
        f"HTTP pace {pace}: {received_ms:.0f} ms received, {after_ms:.0f} ms after the DELETE "
        f"(stream ended {trip_ms:.0f} ms after it), spoken_ms {body['spoken_ms']}"
    )
    assert body["cancelled"] is True and body["status"] == "cancelled", body
    assert received_ms <= body["spoken_ms"] + FRAME_MS, (received_ms, body)
    assert abs(body["spoken_ms"] - received_ms) <= FRAME_MS, (received_ms, body)
    if pace == "realtime":  # paced: only what the DELETE's trip took, no burst of held frames
        assert after_ms <= max(60.0, trip_ms + FRAME_MS), (after_ms, trip_ms)
    result = await _result(kafka_settings, accepted["id"], "cancelled")
    assert abs((result.spoken_ms or 0.0) - received_ms) <= FRAME_MS, (result, received_ms)
    assert result.words_spoken is not None
    assert [w.text for w in result.words_spoken] == [w["text"] for w in body["words_spoken"]]
