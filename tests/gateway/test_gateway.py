"""The gateway against the real pipeline: REST, OpenAI-compatible, WebSocket, auth and limits."""

from __future__ import annotations

import asyncio
import base64
import re

import httpx
import numpy as np
import openai
import orjson
import pytest
import websockets

from streamtts.audio.codecs import decode_audio
from tests.gateway.conftest import ACME, GLOBEX, TINY

pytestmark = [pytest.mark.integration, pytest.mark.model]

TEXT = "Your order has shipped. It should arrive on Tuesday."


def _seconds(data: bytes, fmt: str, sample_rate: int | None = None) -> float:
    samples, rate = decode_audio(data, fmt, sample_rate=sample_rate)
    assert np.sqrt(np.mean(samples**2)) > 0.01, "audio must not be silent"
    return len(samples) / rate


async def test_rest_submit_then_stream_status_and_stored_audio(live_gateway_url: str) -> None:
    async with httpx.AsyncClient(base_url=live_gateway_url, headers=ACME, timeout=60) as client:
        resp = await client.post(
            "/v1/speech", json={"text": TEXT, "voice": "en_joe", "language": "en", "format": "wav"}
        )
        assert resp.status_code == 202, resp.text
        accepted = resp.json()
        rid = accepted["id"]
        assert (
            accepted["status_url"] == f"/v1/speech/{rid}"
            and resp.headers["location"] == accepted["status_url"]
        )

        # Asked for right away, the audio streams as it is produced (chunked, no length).
        async with client.stream("GET", accepted["audio_url"]) as audio:
            assert audio.status_code == 200
            assert audio.headers["content-type"] == "audio/wav"
            assert (
                audio.headers.get("transfer-encoding") == "chunked" and "content-length" not in audio.headers
            )
            pieces = [piece async for piece in audio.aiter_bytes()]
        streamed = b"".join(pieces)

        resp = await client.get(accepted["status_url"], params={"wait": 30})  # long poll until done
        status = resp.json()
        assert status["status"] == "completed", status
        assert status["degradations"] == [] and status["error"] is None
        assert status["time_to_first_audio_ms"] > 0
        assert status["storage"]["key"].startswith("acme/"), "objects are keyed under the tenant"
        expected_s = status["duration_ms"] / 1000
        assert 2.0 < expected_s < 10.0, "two short sentences"
        assert abs(_seconds(streamed, "wav") - expected_s) < 0.01  # wav is lossless: sample-exact

        # Completed: the whole file (with a length), and the presigned URL serves the same.
        whole = await client.get(accepted["audio_url"])
        assert whole.status_code == 200 and int(whole.headers["content-length"]) == len(whole.content)
        assert abs(_seconds(whole.content, "wav") - expected_s) < 0.01
        presigned = await client.get(status["storage"]["url"], headers={"Authorization": ""})
        assert presigned.status_code == 200
        assert abs(_seconds(presigned.content, "wav") - expected_s) < 0.01

        # Another tenant cannot see it: same answer as for an id that never existed.
        globex = {"Authorization": "Bearer key-globex"}  # replaces the client's default key
        other = await client.get(accepted["status_url"], headers=globex)
        assert other.status_code == 404 and other.json()["error"]["code"] == "not_found"
        other_audio = await client.get(accepted["audio_url"], headers=globex)
        assert other_audio.status_code == 404


async def test_openai_compatible_endpoint_streams_audio_to_a_plain_http_client(live_gateway_url: str) -> None:
    body = {"model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": "mp3", "speed": 1.0}
    async with httpx.AsyncClient(base_url=live_gateway_url, timeout=60) as client:
        async with client.stream(
            "POST", "/v1/audio/speech", json=body, headers={"Authorization": "Bearer key-acme"}
        ) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"] == "audio/mpeg"
            assert resp.headers.get("transfer-encoding") == "chunked"
            rid = resp.headers["x-request-id"]
            mp3 = b"".join([piece async for piece in resp.aiter_bytes()])
        assert 2.0 < _seconds(mp3, "mp3") < 10.0
        status = (await client.get(f"/v1/speech/{rid}", params={"wait": 30}, headers=ACME)).json()
        assert status["status"] == "completed"
        assert abs(_seconds(mp3, "mp3") - status["duration_ms"] / 1000) < 0.15  # mp3 padding per chunk

        # pcm is OpenAI's raw 24 kHz s16le; "pcm" at 24 kHz is what we return.
        pcm = await client.post(
            "/v1/audio/speech",
            json={**body, "input": "Hello there.", "response_format": "pcm"},
            headers={"Authorization": "Bearer key-acme"},
        )
        assert pcm.status_code == 200 and "rate=24000" in pcm.headers["content-type"]
        assert 0.4 < _seconds(pcm.content, "pcm", sample_rate=24000) < 3.0


async def test_the_openai_sdk_streams_sse_and_refuses_instructions(live_gateway_url: str) -> None:
    """`stream_format: "sse"` as OpenAI's SDK sends it (livekit's OpenAI plugin does, for
    models other than tts-1): `speech.audio.delta` events whose audio joins into the stream,
    then `speech.audio.done` with usage. `instructions` are refused, never ignored."""
    client = openai.AsyncOpenAI(base_url=live_gateway_url + "/v1", api_key="key-acme")
    events: list[dict] = []
    async with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="alloy", input=TEXT, response_format="pcm", stream_format="sse"
    ) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        rid = resp.headers["x-request-id"]
        async for line in resp.iter_lines():
            if line.startswith("data: "):
                events.append(orjson.loads(line[len("data: ") :]))
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1) and len(events) > 2
    done = events[-1]
    assert done["type"] == "speech.audio.done" and done["usage"]["input_tokens"] == len(TEXT)
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    async with httpx.AsyncClient(base_url=live_gateway_url, headers=ACME, timeout=60) as http:
        status = (await http.get(f"/v1/speech/{rid}", params={"wait": 30})).json()
    assert abs(_seconds(pcm, "pcm", sample_rate=24000) * 1000 - status["duration_ms"]) < 1.0
    # FLAC has no live stream: one delta, the whole file, then done.
    flac: list[dict] = []
    async with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts",
        voice="alloy",
        input="Hello there.",
        response_format="flac",
        stream_format="sse",
    ) as resp:
        async for line in resp.iter_lines():
            if line.startswith("data: "):
                flac.append(orjson.loads(line[len("data: ") :]))
    assert [e["type"] for e in flac] == ["speech.audio.delta", "speech.audio.done"]
    assert 0.4 < _seconds(base64.b64decode(flac[0]["audio"]), "flac") < 3.0
    with pytest.raises(openai.BadRequestError) as refused:
        await client.audio.speech.create(
            model="gpt-4o-mini-tts", voice="alloy", input="Hello.", instructions="Speak like a pirate."
        )
    assert "instructions" in str(refused.value)


async def test_websocket_sentence_mode_streams_each_sentence_in_order_before_the_last_is_sent(
    live_gateway_url: str,
) -> None:
    """`aggregation: "sentence"`: each complete sentence a request of its own."""
    sentences = ["The first sentence is short.", "Here comes a second one.", "And this is the last."]
    url = live_gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    events: list[dict] = []
    audio: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    order: list[tuple[int, int, int]] = []

    async def receive_until(predicate) -> None:  # type: ignore[no-untyped-def]
        pending: dict | None = None
        while not predicate():
            frame = await ws.recv()
            if isinstance(frame, bytes):
                assert pending is not None and pending["bytes"] == len(frame)
                audio[pending["index"]].append(frame)
                pending = None
                continue
            event = orjson.loads(frame)
            events.append(event)
            assert event["type"] != "error", frame
            if event["type"] == "chunk":
                pending = event
                order.append((event["index"], event["seq"], event["part"]))

    async with asyncio.timeout(120), websockets.connect(url, max_size=None) as ws:
        start = {
            "type": "start",
            "voice": "en_joe",
            "language": "en",
            "format": "pcm",
            "aggregation": "sentence",
        }
        await ws.send(orjson.dumps(start).decode())
        # Text arrives as an LLM writes it: fragments, sentence ends mid-fragment.
        await ws.send(orjson.dumps({"type": "text", "text": sentences[0][:9]}).decode())
        await ws.send(
            orjson.dumps({"type": "text", "text": sentences[0][9:] + " " + sentences[1][:5]}).decode()
        )
        await ws.send(sentences[1][5:] + " ")  # a plain text frame is text too
        await receive_until(lambda: bool(audio[0]))
        assert not any(e["type"] == "started" and e["index"] == 2 for e in events)
        await ws.send(orjson.dumps({"type": "text", "text": sentences[2]}).decode())
        await ws.send(orjson.dumps({"type": "end"}).decode())
        await receive_until(lambda: events[-1]["type"] == "done")
        with pytest.raises(websockets.ConnectionClosedOK):
            await ws.recv()

    session = events[0]["session_id"]
    started = [e for e in events if e["type"] == "started"]
    assert [(e["request_id"], e["text"]) for e in started] == [
        (f"{session}-{i}", s) for i, s in enumerate(sentences)
    ]
    assert order == sorted(order), "sentence n's audio comes after all of sentence n-1's"
    completed = [e for e in events if e["type"] == "completed"]
    assert [e["index"] for e in completed] == [0, 1, 2]
    for i, sentence_audio in audio.items():
        seconds = _seconds(b"".join(sentence_audio), "pcm", sample_rate=24000)
        assert abs(seconds * 1000 - completed[i]["duration_ms"]) < 1.0
        assert 0.8 < seconds < 5.0, (i, seconds)


async def test_websocket_turn_is_one_utterance_heard_from_its_first_clause(live_gateway_url: str) -> None:
    """The default: a turn (text until `end`) is one streamed utterance — one request, one
    `completed`, audio from its first whole clause on, before its first sentence ends; words
    timed from the utterance start and placed in its text."""
    reply = (
        "Thanks for calling, I can see your order right here. It shipped on Monday, "
        "and it should arrive by Thursday at the latest."
    )
    words = re.findall(r"\S+\s*", reply)
    url = live_gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    events: list[dict] = []
    audio: list[bytes] = []
    sent_when_heard: int | None = None
    async with asyncio.timeout(120), websockets.connect(url, max_size=None) as ws:
        start = {"type": "start", "voice": "en_joe", "language": "en", "format": "pcm", "timestamps": True}
        await ws.send(orjson.dumps(start).decode())
        sent = 0

        async def read() -> None:
            nonlocal sent_when_heard
            async for frame in ws:
                if isinstance(frame, bytes):
                    audio.append(frame)
                    if sent_when_heard is None:
                        sent_when_heard = sent
                    continue
                event = orjson.loads(frame)
                events.append(event)
                assert event["type"] != "error", frame
                if event["type"] == "done":
                    return

        reader = asyncio.create_task(read())
        first_sentence = len(re.findall(r"\S+", reply.split(". ")[0]))
        for word in words:
            await ws.send(orjson.dumps({"type": "text", "text": word}).decode())
            sent += 1
            # The writer's pace: the first sentence slowly (4 words/s: a stalled machine cannot
            # decide this by timing), the rest at 10 words/s.
            await asyncio.sleep(0.25 if sent < first_sentence else 0.1)
        await ws.send(orjson.dumps({"type": "end"}).decode())
        await reader
    first_sentence_words = first_sentence
    print(
        f"first audio after word {sent_when_heard} of {len(words)} (first sentence: {first_sentence_words})"
    )
    assert sent_when_heard is not None and sent_when_heard < first_sentence_words, (
        f"first audio after word {sent_when_heard}; the first sentence has {first_sentence_words}"
    )
    started = [e for e in events if e["type"] == "started"]
    completed = [e for e in events if e["type"] == "completed"]
    assert len(started) == 1 and len(completed) == 1 and events[-1] == {"type": "done", "sentences": 1}
    seconds = _seconds(b"".join(audio), "pcm", sample_rate=24000)
    assert abs(seconds * 1000 - completed[0]["duration_ms"]) < 1.0 and seconds > 5.0
    said = [w for e in events if e["type"] == "words" for w in e["words"]]
    assert [w["text"] for w in said][:4] == ["Thanks", "for", "calling", "I"]
    assert all(reply[w["char_start"] : w["char_end"]] == w["text"] for w in said)
    assert [w["start_ms"] for w in said] == sorted(w["start_ms"] for w in said)


async def test_keys_tenants_sizes_and_rates_are_enforced(gateway_url: str) -> None:
    async with httpx.AsyncClient(base_url=gateway_url, timeout=30) as client:
        ok = {"text": "Hello.", "voice": "en_joe"}
        wrong = await client.post("/v1/speech", json=ok, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
        assert (await client.post("/v1/speech", json=ok)).status_code == 401
        assert (await client.get("/v1/speech/abc", headers={"X-API-Key": "nope"})).status_code == 401

        mine = await client.post("/v1/speech", json=ok, headers=ACME)
        assert mine.status_code == 202
        rid = mine.json()["id"]
        assert (await client.get(f"/v1/speech/{rid}", headers=ACME)).json()["status"] == "queued"
        theirs = await client.get(f"/v1/speech/{rid}", headers=GLOBEX)
        assert theirs.status_code == 404 and theirs.json()["error"]["code"] == "not_found"
        assert (await client.get("/v1/speech/never-submitted", headers=ACME)).status_code == 404

        too_long = await client.post("/v1/speech", json={"text": "a" * 401}, headers=ACME)
        assert too_long.status_code == 413 and too_long.json()["error"]["code"] == "text_too_long"
        huge = await client.post("/v1/speech", content=b"{" + b" " * 9000 + b"}", headers=ACME)
        assert huge.status_code == 413 and huge.json()["error"]["code"] == "body_too_large"
        openai_long = await client.post(
            "/v1/audio/speech", json={"input": "a" * 401, "voice": "alloy"}, headers=ACME
        )
        assert openai_long.status_code == 413

        other = await client.post("/v1/speech", json={**ok, "tenant": "globex"}, headers=ACME)
        assert other.status_code == 403 and other.json()["error"]["code"] == "forbidden"
        reply = await client.post("/v1/speech", json={**ok, "delivery": {"reply_topic": "x"}}, headers=ACME)
        assert reply.status_code == 403
        bad_voice = await client.post("/v1/speech", json={**ok, "voice": "nobody"}, headers=ACME)
        assert bad_voice.status_code == 400 and bad_voice.json()["error"]["code"] == "unknown_voice"
        bad_format = await client.post(
            "/v1/audio/speech",
            json={"input": "Hi.", "voice": "alloy", "response_format": "aac"},
            headers=ACME,
        )
        assert bad_format.status_code == 400

        codes = [(await client.post("/v1/speech", json=ok, headers=TINY)).status_code for _ in range(3)]
        assert codes == [202, 202, 429]
        limited = await client.post("/v1/speech", json=ok, headers=TINY)
        assert limited.json()["error"]["code"] == "rate_limited" and int(limited.headers["retry-after"]) >= 1
        assert (await client.post("/v1/speech", json=ok, headers=ACME)).status_code == 202, "per tenant"

        ws_url = gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=nope"
        async with websockets.connect(ws_url) as ws:
            assert orjson.loads(await ws.recv())["code"] == "unauthorized"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401

        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/readyz")).json()["ready"] is True
        metrics = (await client.get("/metrics")).text
        assert 'streamtts_gateway_rejected_total{code="rate_limited"} 2.0' in metrics
        assert 'streamtts_gateway_submitted_total{endpoint="speech",tenant="acme"} 2.0' in metrics
        voices = (await client.get("/v1/voices")).json()
        assert (
            "en_joe" in [v["voice_id"] for v in voices["voices"]]
            and voices["openai_voices"]["alloy"] == "en_joe"
        )
        doc = (await client.get("/openapi.json")).json()
        assert doc["openapi"].startswith("3.") and "/v1/audio/speech" in doc["paths"]


async def test_captions_over_rest_and_words_before_each_websocket_chunk(live_gateway_url: str) -> None:
    import webvtt

    text = "Thank you for calling. Your code is 4821."
    async with httpx.AsyncClient(base_url=live_gateway_url, headers=ACME, timeout=60) as client:
        plain = (await client.post("/v1/speech", json={"text": text, "voice": "en_joe"})).json()
        resp = await client.post("/v1/speech", json={"text": text, "voice": "en_joe", "timestamps": True})
        assert resp.status_code == 202, resp.text
        accepted = resp.json()
        assert accepted["captions_url"] == f"/v1/speech/{accepted['id']}/captions"
        vtt = await client.get(accepted["captions_url"], params={"wait": 30})
        assert vtt.status_code == 200 and vtt.headers["content-type"].startswith("text/vtt")
        cues = webvtt.from_string(vtt.text, strict=True)
        assert [c.raw_text for c in cues] == ["Thank you for calling.", "Your code is 4821."]
        srt = await client.get(accepted["captions_url"], params={"format": "srt"})
        assert srt.status_code == 200 and " --> " in srt.text and srt.text.startswith("1\n")
        words = (await client.get(accepted["captions_url"], params={"format": "json"})).json()
        assert [w["text"] for w in words] == ["Thank", "you", "for", "calling", "Your", "code", "is", "4821"]
        assert all(text[w["char_start"] : w["char_end"]] == w["text"] for w in words)
        status = (await client.get(accepted["status_url"])).json()
        assert status["captions_url"] == accepted["captions_url"]
        assert words[-1]["end_ms"] <= status["duration_ms"] + 1
        # Without timestamps: a clear 404; a bad format: 400; another tenant: 404.
        await client.get(plain["status_url"], params={"wait": 30})
        none = await client.get(f"{plain['status_url']}/captions")
        assert none.status_code == 404 and none.json()["error"]["code"] == "no_captions"
        bad = await client.get(accepted["captions_url"], params={"format": "doc"})
        assert bad.status_code == 400
        other = await client.get(accepted["captions_url"], headers={"Authorization": "Bearer key-globex"})
        assert other.status_code == 404

    url = live_gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    frames: list[object] = []
    async with asyncio.timeout(120), websockets.connect(url, max_size=None) as ws:
        start = {
            "type": "start",
            "voice": "en_joe",
            "format": "pcm",
            "timestamps": True,
            "aggregation": "sentence",
        }
        await ws.send(orjson.dumps(start).decode())
        await ws.send(orjson.dumps({"type": "text", "text": "First one here. And a second."}).decode())
        await ws.send(orjson.dumps({"type": "end"}).decode())
        while True:
            frame = await ws.recv()
            frames.append(frame if isinstance(frame, bytes) else orjson.loads(frame))
            if isinstance(frames[-1], dict) and frames[-1]["type"] == "done":
                break
    kinds = ["audio" if isinstance(f, bytes) else f["type"] for f in frames]  # type: ignore[index]
    # Each chunk: its words, then the chunk event, then its audio frame.
    for i, kind in enumerate(kinds):
        if kind == "chunk":
            assert kinds[i - 1] == "words" and kinds[i + 1] == "audio", kinds
    said = [w["text"] for f in frames if isinstance(f, dict) and f["type"] == "words" for w in f["words"]]
    assert said == ["First", "one", "here", "And", "a", "second"]
    second = [f for f in frames if isinstance(f, dict) and f["type"] == "words" and f["index"] == 1]
    first_ms = sum(
        f["duration_ms"] for f in frames if isinstance(f, dict) and f["type"] == "chunk" and f["index"] == 0
    )
    assert abs(second[0]["session_offset_ms"] - first_ms) < 1.0  # places sentence 2 in the session


async def test_cancel_over_rest_and_websocket(live_gateway_url: str) -> None:
    long_text = " ".join(f"Sentence {i} of an answer." for i in range(14))  # under the 400-char test limit
    async with httpx.AsyncClient(base_url=live_gateway_url, headers=ACME, timeout=60) as client:
        resp = await client.post("/v1/speech", json={"text": long_text, "voice": "en_joe", "format": "pcm"})
        assert resp.status_code == 202, resp.text
        accepted = resp.json()
        async with client.stream("GET", accepted["audio_url"]) as audio:
            pieces = audio.aiter_bytes()
            first = await anext(pieces)  # audio is flowing: barge in
            assert first
            stop = await client.delete(accepted["status_url"], params={"played_ms": 500, "wait": 30})
            rest = [piece async for piece in pieces]  # the stream ends, not hangs
        body = stop.json()
        assert stop.status_code == 200 and body["status"] == "cancelled" and body["cancelled"] is True, body
        assert body["spoken_ms"] == 500.0  # the client's playback position, less than produced
        assert (
            len(first) + sum(len(p) for p in rest)
        ) / 2 / 24000 * 1000 < 6000  # far less than 12 sentences
        again = await client.delete(accepted["status_url"])
        assert again.status_code == 200 and again.json()["cancelled"] is False
        assert again.json()["message"] == "already cancelled"
        other = await client.delete(accepted["status_url"], headers={"Authorization": "Bearer key-globex"})
        assert other.status_code == 404
        unknown = await client.delete("/v1/speech/no-such-request")
        assert unknown.status_code == 404

    url = live_gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    events: list[dict] = []
    async with asyncio.timeout(120), websockets.connect(url, max_size=None) as ws:
        await ws.send(orjson.dumps({"type": "start", "voice": "en_joe", "format": "pcm"}).decode())
        await ws.send(orjson.dumps({"type": "text", "text": long_text}).decode())
        while True:  # until the first audio frame, then barge in
            frame = await ws.recv()
            if isinstance(frame, bytes):
                break
        await ws.send(orjson.dumps({"type": "cancel", "played_ms": 300}).decode())
        await ws.send(orjson.dumps({"type": "end"}).decode())
        while True:
            frame = await ws.recv()
            if isinstance(frame, str):
                events.append(orjson.loads(frame))
                if events[-1]["type"] == "done":
                    break
    at = next(i for i, e in enumerate(events) if e["type"] == "cancelled")
    stopped = events[at]
    assert stopped["request_ids"], events
    # The barge-in closes every sentence it dropped: none of them completes after it.
    assert {r["request_id"] for r in stopped["requests"]} >= set(stopped["request_ids"])
    assert not [e for e in events[at:] if e["type"] in ("completed", "chunk", "words")], events
    assert not [e for e in events if e["type"] == "error"], events


async def test_telephony_frames_over_websocket_and_http(live_gateway_url: str) -> None:
    import base64
    import time

    url = live_gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    start = {
        "type": "start",
        "voice": "en_joe",
        "format": "mulaw",
        "frame_ms": 20,
        "pace": "realtime",
        "frames": "media",
    }
    arrivals: list[float] = []
    payloads: list[bytes] = []
    async with asyncio.timeout(120), websockets.connect(url, max_size=None) as ws:
        await ws.send(orjson.dumps(start).decode())
        sent = time.monotonic()
        await ws.send(orjson.dumps({"type": "text", "text": "Thank you for calling, please hold."}).decode())
        await ws.send(orjson.dumps({"type": "end"}).decode())
        while True:
            frame = await ws.recv()
            assert isinstance(frame, str), "media mode sends JSON only"
            event = orjson.loads(frame)
            if event.get("event") == "media":
                arrivals.append(time.monotonic())
                payloads.append(base64.b64decode(event["media"]["payload"]))
            assert event.get("type") not in ("chunk", "error"), event
            if event.get("type") == "done":
                break
    assert payloads and all(len(p) == 160 for p in payloads)  # 20 ms of 8 kHz μ-law each
    print(f"first 8 kHz mu-law frame after {(arrivals[0] - sent) * 1000:.0f} ms, {len(payloads)} frames")
    span = arrivals[-1] - arrivals[0]
    assert span >= (len(payloads) - 1) * 0.020 * 0.9, (span, len(payloads))  # paced at real time
    # HTTP: the same framing on the audio stream.
    async with httpx.AsyncClient(base_url=live_gateway_url, headers=ACME, timeout=60) as client:
        accepted = (
            await client.post(
                "/v1/speech", json={"text": "One moment please.", "voice": "en_joe", "format": "alaw"}
            )
        ).json()
        framed = await client.get(accepted["audio_url"], params={"frame_ms": 40})
        assert framed.status_code == 200 and framed.headers["content-type"] == "audio/x-alaw-basic"
        assert len(framed.content) % 320 == 0 and framed.content  # whole 40 ms frames of 8 kHz A-law
        bad = await client.get(accepted["audio_url"], params={"frame_ms": 25})
        assert bad.status_code == 400
