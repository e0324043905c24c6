"""The topology in memory (`processors.in_memory`) runs the real stages' handlers: for the same
requests it writes byte-identical PCM and audio to what the pipeline on a real broker writes
(several languages, SSML, a tenant lexicon), and each stage writes only its declared outputs;
the sink, given a store in memory, stores files that decode to their results' durations;
`streamtts synth`, which runs it all, writes the file the pipeline stores, byte for byte.

Kokoro voices only: Kokoro is deterministic, Piper draws its VITS noise inside the graph, so
two renders of one Piper request differ by design (docs/render-cache.md) wherever they run."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from minio import Minio

from streamtts.cli.main import main
from streamtts.features.lexicons.book import LexiconBook
from streamtts.features.lexicons.store import LexiconStore
from streamtts.processors.in_memory import InMemoryTopology
from streamtts.producers.request_producer import RequestProducer
from streamtts.producers.result_waiter import ResultWaiter
from streamtts.runtime.kafka import make_consumer, topic_partitions
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import AudioChunk, CompletionResult, LexiconEntry, PcmChunk, Segment, TTSRequest, wire
from streamtts.schemas.headers import header_pairs
from streamtts.sinks.memory_store import MemoryObjectStore
from tests.helpers import decoded_seconds
from tests.services import Services

pytestmark = [pytest.mark.integration, pytest.mark.model]

Chunks = dict[str, list[tuple[int, int, bytes]]]


def _requests(tenant: str) -> list[TTSRequest]:
    def new(text: str, **kw: object) -> TTSRequest:
        return TTSRequest.new(text, tenant=tenant, cache=False, **kw)

    return [
        new("您好，欢迎致电客服中心。请问有什么可以帮您？", language="zh", voice="jm_kumo", format="mp3"),
        new("こんにちは。ご注文の商品は明日届きます。", language="ja", voice="jf_alpha", format="wav"),
        new("我今天用 Python 写了一个 demo。效果很好，大家都喜欢。", format="flac"),  # mixed, auto voice
        new(
            '<speak>您的订单已发货。<break time="400ms"/>预计<say-as interpret-as="date">2026-12-08</say-as>送达。</speak>',
            text_type="ssml",
            voice="jm_kumo",
            format="pcm",
            timestamps=True,
        ),
        new(
            "请拨打 Zorvex 客服热线。我们全天为您服务。", language="zh", voice="jm_kumo", format="pcm"
        ),  # the lexicon's word
    ]


async def _pipeline_chunks(
    kafka: KafkaSettings, topics: TopicNames, requests: list[TTSRequest]
) -> tuple[Chunks, Chunks]:
    """What the running pipeline writes on tts.pcm and tts.audio for `requests`, read by a
    plain consumer positioned at the ends before they are sent."""
    ids = {r.request_id.encode(): r.request_id for r in requests}
    consumer = make_consumer(kafka, group_id=None)
    await consumer.start()
    try:
        parts = [
            TopicPartition(topic, p)
            for topic in (topics.pcm, topics.audio)
            for p in sorted(await topic_partitions(kafka, topic))
        ]
        consumer.assign(parts)
        for tp, end in (await consumer.end_offsets(parts)).items():
            consumer.seek(tp, end)
        async with RequestProducer(kafka) as producer:
            await producer.submit_many(requests)
        pcm: Chunks = {rid: [] for rid in ids.values()}
        audio: Chunks = {rid: [] for rid in ids.values()}
        done: set[tuple[str, str]] = set()
        async with asyncio.timeout(240):
            while len(done) < 2 * len(requests):
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    for r in records:
                        rid = ids.get(r.key or b"")
                        if rid is None:
                            continue
                        headers = header_pairs(r.headers)
                        chunk: PcmChunk | AudioChunk
                        if tp.topic == topics.pcm:
                            chunk = wire.decode(PcmChunk, r.value, headers)
                            pcm[rid].append((chunk.seq, chunk.part, chunk.pcm))
                            assert chunk.degradation is None, (
                                f"the pipeline degraded {rid}: {chunk.degradation}"
                            )
                        else:
                            chunk = wire.decode(AudioChunk, r.value, headers)
                            audio[rid].append((chunk.seq, chunk.part, chunk.audio))
                        if chunk.last and chunk.last_part:
                            done.add((tp.topic, rid))
    finally:
        await consumer.stop()
    return pcm, audio


async def test_the_topology_in_memory_writes_what_the_pipeline_writes(
    running_pipeline, speech_renderer, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    tenant = f"mem-{uuid.uuid4().hex[:8]}"
    lexicon = await LexiconStore(kafka_settings, topics.lexicons).put(
        tenant, [LexiconEntry(grapheme="Zorvex", alias="Acme Corporation", language="en")]
    )
    book = running_pipeline.lexicons
    async with asyncio.timeout(30):
        await book.wait_until(lambda b: b.version(tenant, lexicon.version) is not None)
    requests = _requests(tenant)
    on_kafka_pcm, on_kafka_audio = await _pipeline_chunks(kafka_settings, topics, requests)

    memory_book = LexiconBook(kafka_settings, topics.lexicons)  # filled by hand: never started
    memory_book.take(tenant, lexicon)
    store = MemoryObjectStore()
    async with InMemoryTopology(
        speech_renderer, running_pipeline.pipeline, topics, lexicons=memory_book, object_store=store
    ) as memory:
        await memory.warm()  # as the pipeline's segment stage did at its start
        for request in requests:
            await memory.submit(request)
        await memory.run()
        for request in requests:
            rid = request.request_id
            in_memory = memory.pcm(rid)
            # A budget overrun on a loaded machine degrades a span: say so, not "PCM differs".
            assert all(c.degradation is None for c in in_memory), [c.degradation for c in in_memory]
            in_memory_pcm = [(c.seq, c.part, c.pcm) for c in in_memory]
            assert len(in_memory_pcm) >= 2, "every case has two sentences or more"
            assert in_memory_pcm == on_kafka_pcm[rid], f"PCM differs for {request.text[:20]!r}"
            in_memory_audio = [
                (c.seq, c.part, c.audio)
                for c in (
                    wire.decode(AudioChunk, r.value, header_pairs(r.headers))
                    for r in memory.records(topics.audio, rid)
                )
            ]
            assert in_memory_audio == on_kafka_audio[rid], (
                f"{request.format} differs for {request.text[:20]!r}"
            )
        results = [
            wire.decode(CompletionResult, r.value, header_pairs(r.headers))
            for r in memory.log[topics.results]
        ]
        written = {stage.group: dict(stage.outputs.written) for stage in memory.stages}
        spoken = [
            wire.decode(Segment, r.value, header_pairs(r.headers)).text
            for r in memory.records(topics.segments, requests[-1].request_id)
        ]
    assert any("Acme Corporation" in text for text in spoken), (
        f"the tenant's lexicon was not applied: {spoken}"
    )
    assert set(written["segment"]) == {"segments"} and written["segment"]["segments"] == sum(
        len({c[0] for c in on_kafka_pcm[r.request_id]}) for r in requests
    )
    assert set(written["synthesize"]) == {"pcm"} and not written["synthesize-long"]
    assert set(written["encode"]) == {"audio", "file_parts"}
    # The sink ran too: one completed result per request, its file in the store in memory.
    assert written["sink"] == {"results": len(requests)}
    assert sorted(r.request_id for r in results) == sorted(r.request_id for r in requests)
    for result in results:
        assert result.status == "completed" and result.storage is not None, result
        stored = store.objects[result.storage.key].data
        decoded_ms = decoded_seconds(stored, result.format, result.sample_rate) * 1000
        # mp3: one encoder delay (1105 samples) and less than a frame (1152) of padding.
        tolerance_ms = {"mp3": (1105 + 1152) / result.sample_rate * 1000}.get(result.format, 30.0)
        assert abs(decoded_ms - result.duration_ms) < tolerance_ms, (result.format, decoded_ms, result)


async def test_streamtts_synth_writes_the_file_the_pipeline_stores(
    running_pipeline, kafka_settings: KafkaSettings, services: Services, tmp_path: Path
) -> None:
    """The offline CLI runs the same stages in memory and makes the file as the sink does: for
    the same text and settings its file is the pipeline's stored object, byte for byte (mp3:
    the frames of one continuous stream behind their Info frame, encoded once)."""
    text = "您好，欢迎致电客服中心。请问有什么可以帮您？我们马上为您处理。"
    request = TTSRequest.new(text, language="zh", voice="jm_kumo", format="mp3", cache=False)
    async with ResultWaiter(kafka_settings) as waiter:
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit(request)
        result = (await waiter.wait([request.request_id], timeout_s=180))[request.request_id]
    assert result.status == "completed" and result.storage is not None and not result.degraded
    s3 = services.s3
    client = Minio(s3.endpoint, access_key=s3.access_key, secret_key=s3.secret_key, secure=s3.secure)
    stored = client.get_object(result.storage.bucket, result.storage.key)
    try:
        stored_bytes = stored.read()
    finally:
        stored.close()
    assert result.storage.made_from == "streamed"
    out = tmp_path / "offline.mp3"
    args = ["synth", "--text", text, "--lang", "zh", "--voice", "jm_kumo", "--out", str(out)]
    assert await asyncio.to_thread(main, args) == 0
    offline = out.read_bytes()
    assert len(offline) > 8_000, "over a second of 64 kbps speech"
    assert offline == stored_bytes
