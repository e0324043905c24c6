"""The product end to end: requests in on real Kafka, audio out to subscribers and MinIO."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest
from minio import Minio

from streamtts.audio.codecs import decode_audio
from streamtts.producers.request_producer import RequestProducer
from streamtts.producers.result_waiter import ResultWaiter
from streamtts.runtime.kafka import make_consumer, make_producer
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import CompletionResult, DeadLetter, PcmChunk, TTSRequest, wire
from streamtts.sinks.subscriber import AudioSubscriber
from tests.helpers import cli_env
from tests.services import Services

pytestmark = [pytest.mark.integration, pytest.mark.model]

CASES = [
    ("zh", "您好，欢迎致电客服中心。请问有什么可以帮您？", "mp3", "jm_kumo"),
    ("en", "Your order has shipped. It should arrive on Tuesday.", "opus", "en_joe"),
    ("ja", "こんにちは。ご注文の商品は明日届きます。", "flac", "jf_alpha"),
    ("zh", "我今天用 Python 写了一个 demo，效果很好。", "wav", "auto"),
]


def _s3(services: Services) -> Minio:
    s = services.s3
    return Minio(s.endpoint, access_key=s.access_key, secret_key=s.secret_key, secure=s.secure)


async def test_requests_in_four_languages_and_formats_stream_and_store(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames, services: Services
) -> None:
    requests = [
        TTSRequest.new(text, language=lang, format=fmt, voice=voice, tenant="acme", metadata={"case": str(i)})
        for i, (lang, text, fmt, voice) in enumerate(CASES)
    ]
    ids = [r.request_id for r in requests]
    async with (
        ResultWaiter(kafka_settings) as waiter,
        AudioSubscriber(kafka_settings, topics.audio, request_ids=ids) as sub,
    ):
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit_many(requests)
        received = {a.request_id: a async for a in sub.completed(timeout_s=240)}
        results = await waiter.wait(ids, timeout_s=60)
    assert set(received) == set(ids)
    s3 = _s3(services)
    for req in requests:
        audio, result = received[req.request_id], results[req.request_id]
        # Chunks are complete, ordered, without duplicates; the last one closes the request.
        positions = [(c.seq, c.part) for c in audio.chunks]
        assert positions == sorted(positions) and len(set(positions)) == len(positions)
        assert audio.chunks[-1].last and not any(c.last for c in audio.chunks[:-1])
        assert [c.seq for c in audio.chunks if c.last_part] == list(range(audio.chunks[0].total))
        # The concatenation of chunks decodes to the expected duration ...
        from_chunks, rate = decode_audio(audio.data, req.format, sample_rate=req.sample_rate)
        assert rate == (48000 if req.format == "opus" else req.sample_rate)  # Opus decodes at 48 kHz
        tolerance_s = 0.06 * len(audio.chunks) + 0.03  # mp3 adds encoder delay/padding per chunk
        assert abs(len(from_chunks) / rate - result.duration_ms / 1000) <= tolerance_s
        assert result.duration_ms > 1500, "a sentence or two is well over 1.5 s of speech"
        assert np.sqrt(np.mean(from_chunks**2)) > 0.01, "audio must not be silent"
        # ... the completion result is a correct claim check ...
        assert result.status == "completed" and result.tenant == "acme" and result.metadata == req.metadata
        assert result.chunks == len(audio.chunks)
        assert result.storage is not None
        assert (
            result.storage.key
            == f"acme/{req.created_at:%Y/%m/%d}/{req.request_id}.{'opus' if req.format == 'opus' else req.format}"
        )
        stat = s3.stat_object(result.storage.bucket, result.storage.key)
        assert stat.size == result.storage.size and stat.etag == result.storage.etag
        # ... and the stored object decodes to the same audio.
        resp = s3.get_object(result.storage.bucket, result.storage.key)
        stored = resp.read()
        resp.close()
        from_object, orate = decode_audio(stored, req.format, sample_rate=req.sample_rate)
        assert orate == rate
        if req.format in ("wav", "flac", "pcm"):  # lossless: sample-identical
            diff = np.flatnonzero(np.round(from_object * 32768) != np.round(from_chunks * 32768))
            assert diff.size == 0, (req.format, diff[:10], len(from_chunks))
        else:
            assert abs(len(from_object) - len(from_chunks)) / rate <= tolerance_s
        # One encode per request: where the format's streamed payloads make a file, the stored
        # object is those very bytes (mp3: behind one Info frame) and decodes to the result's
        # duration to the sample; opus and flac are encoded from the PCM.
        assert result.storage.made_from == ("pcm" if req.format in ("opus", "flac") else "streamed")
        if req.format == "mp3":
            assert stored.endswith(audio.data) and len(stored) - len(audio.data) < 1_000
            assert len(from_object) == round(result.duration_ms * rate / 1000)
    # What each stage wrote is what its spec declares (no request failed: no dead letters;
    # results of requests a test before this one left unfinished may come too).
    wrote = {stage.group: dict(stage.outputs.written) for stage in running_pipeline.services}
    assert set(wrote["segment"]) == {"segments"}  # four short requests: the short pool only
    assert set(wrote["synthesize"]) == {"pcm"} and not wrote["synthesize-long"]
    assert set(wrote["encode"]) == {"audio", "file_parts"}
    assert set(wrote["sink"]) == {"results"} and wrote["sink"]["results"] >= len(requests)


async def test_first_chunk_leaves_before_the_last_segment_is_synthesized(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    text = (
        "Thank you for calling. Your account balance is one hundred dollars. "
        "Your next payment is due on the fifth of December. Is there anything else I can help with today?"
    )
    req = TTSRequest.new(text, language="en", voice="jm_kumo", format="mp3")
    pcm_reader = make_consumer(kafka_settings, topics.pcm, group_id=None, auto_offset_reset="earliest")
    await pcm_reader.start()
    try:
        async with AudioSubscriber(kafka_settings, topics.audio, request_ids=[req.request_id]) as sub:
            async with RequestProducer(kafka_settings) as producer:
                await producer.submit(req)
            received = [a async for a in sub.completed(timeout_s=180)]
        assert received, "the request must complete"
        pcm: list[PcmChunk] = []
        async with asyncio.timeout(30):
            while not any(c.last for c in pcm):
                for records in (await pcm_reader.getmany(timeout_ms=500)).values():
                    pcm += [wire.decode(PcmChunk, r.value, r.headers) for r in records]
    finally:
        await pcm_reader.stop()
    chunks = received[0].chunks
    assert chunks[0].total >= 4, "a multi-sentence request is several segments"
    last_synthesized = max(c.synthesized_at for c in pcm if c.request_id == req.request_id)
    # Streaming: the first audio chunk was encoded and published while synthesis still ran.
    assert chunks[0].encoded_at < last_synthesized
    first_span = chunks[0].duration_ms
    assert first_span < 0.5 * received[0].duration_ms, "the first span is kept short"


async def test_poison_requests_do_not_stop_the_stages(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    huge = TTSRequest.new("word " * 40_000, language="en")  # 200 KB of text: over the stage limit
    bad_voice = TTSRequest.new("Hello.", voice="no_such_voice")
    good = TTSRequest.new("Still working after the bad ones.", language="en", voice="en_joe", format="mp3")
    producer = make_producer(kafka_settings)
    await producer.start()
    try:
        await producer.send_and_wait(topics.requests, key=b"junk", value=b"\x00not json at all")
        oversize = (
            b'{"schema_version":1,"request_id":"mega","text":"'
            + b"a" * 1_100_000
            + b'","created_at":"2026-01-01T00:00:00Z"}'
        )
        await producer.send_and_wait(topics.requests, key=b"mega", value=oversize)
        for r in (huge, bad_voice):
            await producer.send_and_wait(topics.requests, key=r.request_id.encode(), value=r.to_bytes())
    finally:
        await producer.stop()
    async with ResultWaiter(kafka_settings) as waiter:
        async with RequestProducer(kafka_settings) as rp:
            await rp.submit(good)
        results = await waiter.wait([good.request_id], timeout_s=120)
    assert results[good.request_id].status == "completed"
    dlq = make_consumer(kafka_settings, topics.dlq("segment"), group_id=None)
    await dlq.start()
    letters: list[DeadLetter] = []
    try:
        async with asyncio.timeout(30):
            while len(letters) < 4:
                for records in (await dlq.getmany(timeout_ms=500)).values():
                    letters += [DeadLetter.from_record(r.key, r.value, r.headers) for r in records]
    finally:
        await dlq.stop()
    reasons = {(d.key_text, d.reason) for d in letters}
    assert reasons == {
        ("junk", "invalid_json"),
        ("mega", "string_too_long"),
        (huge.request_id, "string_too_long")
        if len(huge.text) > 200_000
        else (huge.request_id, "text_too_long"),
        (bad_voice.request_id, "unknown_voice"),
    }
    assert all(d.topic == topics.requests and d.stage == "segment" for d in letters)


async def test_result_without_storage_reports_duration_only(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    req = TTSRequest.new(
        "Chunks only, please.",
        language="en",
        voice="en_joe",
        format="pcm",
        delivery={"chunks": True, "storage": False},
    )
    async with (
        ResultWaiter(kafka_settings) as waiter,
        AudioSubscriber(kafka_settings, topics.audio, request_ids=[req.request_id]) as sub,
    ):
        async with RequestProducer(kafka_settings) as p:
            await p.submit(req)
        audio = await anext(a async for a in sub.completed(timeout_s=120))
        result: CompletionResult = (await waiter.wait([req.request_id], 60))[req.request_id]
    assert result.storage is None and result.status == "completed"
    samples, _ = decode_audio(audio.data, "pcm", sample_rate=req.sample_rate)
    assert abs(len(samples) / req.sample_rate * 1000 - result.duration_ms) < 1.0
    assert isinstance(io.BytesIO(audio.data).getvalue(), bytes)


async def test_submit_wait_out_and_listen_write_playable_files(
    running_pipeline, kafka_settings: KafkaSettings, services: Services, tmp_path
) -> None:
    import subprocess
    import sys

    env = cli_env(kafka_settings, services.s3)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "streamtts.cli.main", *args],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )

    out = tmp_path / "hello.opus"
    proc = await asyncio.to_thread(
        cli,
        "submit",
        "--wait",
        "--out",
        str(out),
        "--format",
        "opus",
        "--voice",
        "en_joe",
        "--request-id",
        "cli-req-1",
        "Hello from the command line.",
    )
    assert proc.returncode == 0, proc.stderr
    samples, rate = decode_audio(out.read_bytes(), "opus")
    assert rate == 48000 and 1.0 < len(samples) / rate < 6.0
    listened = await asyncio.to_thread(
        cli,
        "listen",
        "--request-id",
        "cli-req-1",
        "--out-dir",
        str(tmp_path / "l"),
        "--timeout",
        "30",
    )
    assert listened.returncode == 0, listened.stderr
    heard, hrate = decode_audio((tmp_path / "l" / "cli-req-1.opus").read_bytes(), "opus")
    assert abs(len(heard) / hrate - len(samples) / rate) < 0.2
    bad = await asyncio.to_thread(cli, "submit", "--out", str(out), "x")
    assert bad.returncode == 1 and bad.stderr.strip() == "streamtts: error: --out needs --wait"


async def test_a_new_requests_first_segment_overtakes_queued_segments(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    """Head-of-line blocking: B's first audio must not wait for all of A's queued sentences."""
    a = TTSRequest.new(
        " ".join(f"Sentence {i} of the first request, which is long." for i in range(5)),
        language="en",
        voice="jm_kumo",
        format="mp3",
    )
    b = TTSRequest.new("Second caller here.", language="en", voice="jm_kumo", format="mp3")
    assert len(a.text) < 300, "both in the short pool: the same synthesize worker and queue"
    async with AudioSubscriber(kafka_settings, topics.audio, request_ids=[a.request_id, b.request_id]) as sub:
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit(a)
            await sub.wait_first_chunk(a.request_id, timeout_s=120)
            await producer.submit(b)  # A's later sentences are queued by now
        done = {audio.request_id: audio async for audio in sub.completed(timeout_s=180)}
    assert set(done) == {a.request_id, b.request_id}
    b_first = done[b.request_id].first_chunk_at
    a_last = done[a.request_id].completed_at
    assert b_first < a_last, "B's first chunk left before A's last sentence"


async def test_g711_requests_stream_and_store_at_8_khz(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames, services: Services
) -> None:
    """Telephony: raw μ-law chunks a bridge can forward as they come, an A-law WAV file."""
    import av

    mulaw = TTSRequest.new(
        "Thank you for calling. Please hold.", voice="en_joe", format="mulaw", tenant="acme"
    )
    alaw_wav = TTSRequest.new("您好，请稍等。", voice="auto", format="wav", codec="alaw", tenant="acme")
    assert mulaw.sample_rate == alaw_wav.sample_rate == 8000
    ids = [mulaw.request_id, alaw_wav.request_id]
    async with (
        ResultWaiter(kafka_settings) as waiter,
        AudioSubscriber(kafka_settings, topics.audio, request_ids=ids) as sub,
    ):
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit_many([mulaw, alaw_wav])
        received = {a.request_id: a async for a in sub.completed(timeout_s=240)}
        results = await waiter.wait(ids, timeout_s=60)
    s3 = _s3(services)
    raw = received[mulaw.request_id]
    assert all(c.format == "mulaw" and c.sample_rate == 8000 for c in raw.chunks)
    stream = raw.data
    assert stream == b"".join(c.audio for c in raw.chunks)  # raw G.711 concatenates
    assert abs(len(stream) / 8000 * 1000 - results[mulaw.request_id].duration_ms) < 1.0  # 1 byte a sample
    with av.open(io.BytesIO(stream), format="mulaw", options={"sample_rate": "8000"}) as container:
        decoded = np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])
    assert np.sqrt(np.mean((decoded / 32768.0) ** 2)) > 0.01
    stored = results[mulaw.request_id].storage
    assert stored is not None and stored.key.endswith(".ulaw") and stored.content_type == "audio/basic"
    wav = results[alaw_wav.request_id].storage
    assert wav is not None and wav.key.endswith(".wav")
    resp = s3.get_object(wav.bucket, wav.key)
    data = resp.read()
    resp.close()
    with av.open(io.BytesIO(data), format="wav") as container:
        audio_stream = container.streams.audio[0]
        assert audio_stream.codec_context.name == "pcm_alaw" and audio_stream.rate == 8000


FORMANT_CASES = [
    ("pl", "Dzień dobry, Pana zamówienie zostało wysłane wczoraj wieczorem."),
    ("tr", "Merhaba, siparişiniz dün akşam kargoya verildi."),
    ("nl", "Goedemiddag, uw bestelling is gisteren verzonden."),
]


async def test_languages_without_a_neural_voice_complete_through_espeaks_formant_voice(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames, services: Services
) -> None:
    """Polish, Turkish and Dutch (no `language` given: identified) are spoken by espeak-ng's
    formant voice, marked as such on chunks and results, stored, and timed word by word;
    a Spanish request beside them stays neural."""
    requests = [TTSRequest.new(text, format="mp3", timestamps=True) for _, text in FORMANT_CASES]
    spanish = TTSRequest.new("Su pedido fue enviado ayer por la tarde.", format="mp3", timestamps=True)
    ids = [r.request_id for r in [*requests, spanish]]
    async with (
        ResultWaiter(kafka_settings) as waiter,
        AudioSubscriber(kafka_settings, topics.audio, request_ids=ids) as sub,
    ):
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit_many([*requests, spanish])
        received = {a.request_id: a async for a in sub.completed(timeout_s=240)}
        results = await waiter.wait(ids, timeout_s=60)
    s3 = _s3(services)
    for (lang, text), req in zip(FORMANT_CASES, requests, strict=True):
        audio, result = received[req.request_id], results[req.request_id]
        assert result.status == "completed", (lang, result.error)
        assert {d.step for d in result.degraded} == {"formant"}, (lang, result.degraded)
        assert all(c.degradation is not None and c.degradation.step == "formant" for c in audio.chunks)
        assert result.storage is not None
        stored = s3.get_object(result.storage.bucket, result.storage.key).read()
        samples, rate = decode_audio(stored, "mp3")
        assert len(samples) / rate > 1.5 and np.sqrt(np.mean(samples**2)) > 0.01, lang
        assert result.words, f"{lang}: word timestamps from espeak's word events"
        words = [w.text for w in result.words]
        assert all(text[w.char_start : w.char_end] == w.text for w in result.words)
        assert words == [t.strip(",.") for t in text.split()], (lang, words)
        starts = [w.start_ms for w in result.words]
        assert starts == sorted(starts) and result.words[-1].end_ms <= result.duration_ms + 1
    neural = results[spanish.request_id]
    assert neural.status == "completed" and not neural.degraded, neural.degraded
