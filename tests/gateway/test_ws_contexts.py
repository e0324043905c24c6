"""Several replies on one WebSocket (`context_id`), with a real `websockets` client acting as a
voice agent, against Kafka and the pipeline: the next reply is written and rendered while the
last one plays, the last one is cut, and the next is heard at once; the other contexts are
left alone, and the socket cannot open contexts without bound."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
import websockets

from streamtts.runtime.settings import KafkaSettings
from tests.gateway.test_barge_in import _result

pytestmark = [pytest.mark.integration, pytest.mark.model]

FRAME_MS = 20
LAST = (
    "Thanks for waiting, I have found your booking for tomorrow. "
    "Your flight leaves at nine fifteen in the morning from terminal two. "
    "Boarding starts forty minutes before departure, so please come early. "
)
NEXT = "Of course, let me change that for you."


@dataclass
class Line:
    """What the client got, in order: events, and per request the frames after its `words`
    (the sessions here ask for timestamps: every chunk's `words` event, an empty list too,
    comes before its frames, and the line forwards one request at a time)."""

    ws: Any
    events: list[dict[str, Any]] = field(default_factory=list)
    frames: dict[str, int] = field(default_factory=dict)
    order: list[tuple[str, str]] = field(default_factory=list)
    """(kind, request id) in arrival order: "frame" for audio, else the event type."""
    first_frame_at: dict[str, float] = field(default_factory=dict)
    _speaking: str = ""
    _taken: set[int] = field(default_factory=set)

    async def until(self, match: Any) -> dict[str, Any]:
        """The first event that `match`es and no earlier call returned, reading on as needed."""
        while True:
            for n, event in enumerate(self.events):
                if n not in self._taken and match(event):
                    self._taken.add(n)
                    return event
            frame = await self.ws.recv()
            if isinstance(frame, bytes):
                # Framed audio has no `chunk` events: a frame belongs to the request whose
                # `words` (sent before each chunk's frames) came last.
                self.frames[self._speaking] = self.frames.get(self._speaking, 0) + 1
                self.first_frame_at.setdefault(self._speaking, time.monotonic())
                self.order.append(("frame", self._speaking))
                continue
            event = orjson.loads(frame)
            if event.get("type") == "words":
                self._speaking = event["request_id"]
            self.order.append((event.get("type", ""), event.get("request_id", "")))
            self.events.append(event)

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(orjson.dumps(message).decode())


async def test_the_next_reply_renders_while_the_last_plays_and_is_heard_when_it_is_cut(
    live_gateway_url: str, kafka_settings: KafkaSettings
) -> None:
    url = live_gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    start = {
        "type": "start",
        "voice": "en_joe",
        "format": "pcm",
        "frame_ms": FRAME_MS,
        "pace": "realtime",  # the last reply plays for seconds, as on a phone line
        "timestamps": True,
    }
    async with asyncio.timeout(120), websockets.connect(url, max_size=None) as ws:
        line = Line(ws)
        await line.send(start)
        # 1. The last reply (context "a") is written and plays.
        await line.send({"type": "text", "context_id": "a", "text": LAST})
        started_a = await line.until(lambda e: e["type"] == "started")
        rid_a = started_a["request_id"]
        assert started_a["context_id"] == "a"
        await line.until(lambda e: e["type"] == "words" and e["request_id"] == rid_a)
        # 2. The next reply (context "b") is written whole while it plays, and rendered.
        await line.send({"type": "text", "context_id": "b", "text": NEXT})
        await line.send({"type": "end", "context_id": "b"})
        started_b = await line.until(lambda e: e["type"] == "started" and e.get("context_id") == "b")
        rid_b = started_b["request_id"]
        rendered = await _result(kafka_settings, rid_b, "completed")
        assert rendered.duration_ms and rendered.duration_ms > 1000
        # 3. The caller speaks: the agent cuts "a" only.
        cut_sent = time.monotonic()
        await line.send({"type": "cancel", "context_id": "a"})
        cancelled = await line.until(lambda e: e["type"] == "cancelled")
        done_b = await line.until(lambda e: e["type"] == "completed" and e["request_id"] == rid_b)
        await line.send({"type": "end"})
        await line.until(lambda e: e["type"] == "done")
    # "a" was cut while it played; what was heard of it is what the client got of it.
    assert cancelled["context_id"] == "a" and cancelled["request_ids"] == [rid_a], cancelled
    [entry] = cancelled["requests"]
    assert entry["context_id"] == "a"
    assert abs(entry["spoken_ms"] - line.frames[rid_a] * FRAME_MS) <= FRAME_MS, (entry, line.frames)
    assert (await _result(kafka_settings, rid_a, "cancelled")).spoken_ms == pytest.approx(
        entry["spoken_ms"], abs=FRAME_MS
    )
    # Nothing of "a" after `cancelled`; all of "b" after it, and "b" whole.
    at = line.order.index(("cancelled", ""))
    assert not [k for k in line.order[at:] if k[1] == rid_a], line.order[at:]
    assert not [k for k in line.order[:at] if k[1] == rid_b and k[0] == "frame"]
    assert done_b["context_id"] == "b" and not done_b["cancelled"]
    assert abs(line.frames[rid_b] * FRAME_MS - done_b["duration_ms"]) <= FRAME_MS, (line.frames, done_b)
    # "b" was rendered before the cut: it is heard as soon as "a" is silent (generous bound:
    # forwarding audio the gateway holds, not rendering it).
    waited = line.first_frame_at[rid_b] - cut_sent
    print(f"next reply heard {waited * 1000:.0f} ms after the cut ({line.frames[rid_a]} frames of the last)")
    assert waited < 2.0, waited


async def test_contexts_are_bounded_named_and_cut_together(live_gateway_url: str) -> None:
    url = live_gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    async with asyncio.timeout(90), websockets.connect(url, max_size=None) as ws:
        line = Line(ws)
        start = {"type": "start", "voice": "en_joe", "format": "pcm", "frame_ms": 20, "pace": "realtime"}
        await line.send({**start, "timestamps": True})
        await line.send({"type": "text", "context_id": "bad id!", "text": "Hello."})
        bad = await line.until(lambda e: e["type"] == "error")
        assert bad["code"] == "invalid_message" and "context_id" in bad["message"]
        for n in range(8):  # the default limit: eight open contexts
            # x0 opens with a flush: its request is on the line before the flush is confirmed,
            # and its events must name its context all the same.
            text = {
                "type": "text",
                "context_id": f"x{n}",
                "text": "Hello there, and welcome.",
                "flush": n == 0,
            }
            await line.send(text)
        await line.send({"type": "text", "context_id": "x8", "text": "One too many."})
        refused = await line.until(lambda e: e["type"] == "error")
        assert refused["code"] == "too_many_contexts", refused
        opened = [(await line.until(lambda e: e["type"] == "started")) for _ in range(8)]
        assert [e["context_id"] for e in opened] == [f"x{n}" for n in range(8)]
        # A plain cancel cuts every context; the socket takes a new reply after it.
        await line.send({"type": "cancel"})
        cancelled = await line.until(lambda e: e["type"] == "cancelled")
        cut = set(cancelled["request_ids"])
        assert cut and cut <= {e["request_id"] for e in opened}, cancelled
        # An `end` that crossed its context's cancel is no error, nor one for the context
        # refused above; one for a context never named (a typo) is, rather than leaving the
        # real one open until its idle end.
        await line.send({"type": "end", "context_id": "x3"})
        await line.send({"type": "end", "context_id": "x8"})
        await line.send({"type": "end", "context_id": "x3-typo"})
        unknown = await line.until(lambda e: e["type"] == "error")
        assert unknown["code"] == "unknown_context" and unknown["context_id"] == "x3-typo", unknown
        await line.send({"type": "cancel", "context_id": "x4-typo"})  # likewise for a cancel
        unknown = await line.until(lambda e: e["type"] == "error")
        assert unknown["code"] == "unknown_context" and unknown["context_id"] == "x4-typo", unknown
        await line.send({"type": "text", "context_id": "x0", "text": "Anything else?"})
        again = await line.until(lambda e: e["type"] == "started")
        await line.send({"type": "end"})
        await line.until(lambda e: e["type"] == "done")
    at = line.order.index(("cancelled", ""))
    assert not [k for k in line.order[at:] if k[1] in cut], line.order[at:]
    assert again["context_id"] == "x0" and again["request_id"] not in cut
    first = opened[0]["request_id"]
    about_first = [e for e in line.events if e.get("request_id") == first and e["type"] != "cancelled"]
    assert about_first and all(e.get("context_id") == "x0" for e in about_first), about_first
    assert line.frames.get(again["request_id"], 0) > 0
    assert ("completed", again["request_id"]) in line.order[at:]


async def test_a_context_needs_utterance_aggregation(live_gateway_url: str) -> None:
    url = live_gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    async with asyncio.timeout(30), websockets.connect(url, max_size=None) as ws:
        line = Line(ws)
        await line.send({"type": "start", "voice": "en_joe", "aggregation": "sentence"})
        await line.send({"type": "text", "context_id": "a", "text": "Hello."})
        error = await line.until(lambda e: e["type"] == "error")
        assert error["code"] == "invalid_message" and "aggregation" in error["message"], error
