"""`streamtts bench --llm-stream`: replies streamed as an LLM writes them, through the gateway
and through Kafka.

Each reply (`llm_replies`: customer-service en, zh, ja) is sent token by token at a fixed
pace (10, 25, 50 tokens/s; 8 and 25 in the quick run), one at a time, against a pipeline of
worker processes on fresh topics and a gateway in this process. Side by side:

- `ws utterance` (the default): the WebSocket turn is one streamed utterance; the segment
  stage speaks its first clause as soon as it is whole;
- `ws sentence` (the earlier behaviour): each complete sentence is a request of its own;
- `kafka utterance`: the Kafka contract itself (`RequestProducer.send_delta`), audio as a
  plain subscriber of the chunk stream gets it.

Per reply, measured by this client: first audio after the first token was sent, after the
first clause was complete (the token that completed it), and after the first sentence was
complete; and the last audio after `end`. The engine's own time for the first clause, rendered idle in
this process (`engine_first_span_ms`), is the floor any TTS that waits for that clause pays:
the target is first audio ≤ clause complete + that + 150 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import websockets

from streamtts.bench.fresh_workers import bench_gateway
from streamtts.bench.llm_replies import REPLIES, Reply, completing_token
from streamtts.bench.stats import rounded_percentile
from streamtts.bench.token_stream import stream_tokens, write_paced
from streamtts.runtime.settings import KafkaSettings

MODES = ("utterance", "sentence")
PATHS = (("ws", "utterance"), ("ws", "sentence"), ("kafka", "utterance"))
"""(transport, mode) pairs measured: the gateway's WebSocket both ways, and the Kafka contract
(an opening request and text deltas, audio from the chunk stream) as an utterance."""


@dataclass
class StreamRun:
    lang: str
    transport: str
    mode: str
    words_per_s: float
    after_first_word_ms: list[float] = field(default_factory=list)
    after_clause_ms: list[float] = field(default_factory=list)
    after_sentence_ms: list[float] = field(default_factory=list)
    end_to_last_ms: list[float] = field(default_factory=list)
    engine_first_span_ms: list[float] = field(default_factory=list)
    errors: int = 0

    def row(self) -> dict[str, Any]:
        p = rounded_percentile
        return {
            "lang": self.lang,
            "transport": self.transport,
            "mode": self.mode,
            "words_per_s": self.words_per_s,
            "replies": len(self.after_first_word_ms),
            "errors": self.errors,
            "first_audio_after_first_word_p50_ms": p(self.after_first_word_ms, 50),
            "first_audio_after_first_word_p95_ms": p(self.after_first_word_ms, 95),
            "first_audio_after_clause_p50_ms": p(self.after_clause_ms, 50),
            "first_audio_after_clause_p95_ms": p(self.after_clause_ms, 95),
            "first_audio_after_sentence_p50_ms": p(self.after_sentence_ms, 50),
            "end_to_last_audio_p50_ms": p(self.end_to_last_ms, 50),
            "engine_first_span_p50_ms": p(self.engine_first_span_ms, 50),
        }

    def record(self, sent: list[float], reply: Reply, first: float, last: float, ended: float) -> None:
        tokens = stream_tokens(reply.text)
        self.after_first_word_ms.append((first - sent[0]) * 1000)
        self.after_clause_ms.append((first - sent[completing_token(tokens, sentence=False)]) * 1000)
        self.after_sentence_ms.append(
            (first - sent[completing_token(tokens, sentence=True, min_cost=1)]) * 1000
        )
        self.end_to_last_ms.append((last - ended) * 1000)


async def _reply_ws(url: str, reply: Reply, mode: str, words_per_s: float, run: StreamRun) -> None:
    tokens = stream_tokens(reply.text)
    sent: list[float] = []
    start = {
        "type": "start",
        "voice": reply.voice,
        "language": reply.lang,
        "format": "pcm",
        "aggregation": mode,
    }
    async with websockets.connect(url, max_size=None) as ws:
        await ws.send(orjson.dumps(start).decode())

        async def write() -> float:
            sent[:] = await write_paced(
                tokens,
                words_per_s,
                lambda token: ws.send(orjson.dumps({"type": "text", "text": token}).decode()),
            )
            await ws.send(orjson.dumps({"type": "end"}).decode())
            return time.monotonic()

        writer = asyncio.create_task(write())
        first: float | None = None
        last: float | None = None
        async for frame in ws:
            if isinstance(frame, bytes):
                last = time.monotonic()
                first = first or last
                continue
            event = orjson.loads(frame)
            if event.get("type") == "error":
                run.errors += 1
            if event.get("type") == "done":
                break
        ended = await writer
    if first is None or last is None:
        run.errors += 1
        return
    run.record(sent, reply, first, last, ended)


async def _reply_kafka(kafka: KafkaSettings, reply: Reply, words_per_s: float, run: StreamRun) -> None:
    """The Kafka contract as a platform uses it: an opening request, the tokens as text
    deltas, the end; the audio as a plain subscriber of the chunk stream gets it."""
    from streamtts.producers.request_producer import RequestProducer
    from streamtts.runtime.topics import TopicNames
    from streamtts.schemas import TextDelta, TTSRequest
    from streamtts.schemas.utterance import StreamOptions
    from streamtts.sinks.subscriber import AudioSubscriber

    tokens = stream_tokens(reply.text)
    opener = TTSRequest.new(
        "", voice=reply.voice, language=reply.lang, format="pcm", cache=False, stream=StreamOptions()
    )
    rid = opener.request_id
    sent: list[float] = []
    topics = TopicNames(kafka.topic_prefix)
    async with (
        AudioSubscriber(kafka, topics.audio, request_ids=[rid]) as sub,
        RequestProducer(kafka, topics) as producer,
    ):
        await producer.submit(opener)

        async def write() -> float:
            sent[:] = await write_paced(
                tokens,
                words_per_s,
                lambda token: producer.send_delta(TextDelta(request_id=rid, delta=token), wait=False),
            )
            await producer.send_delta(TextDelta(request_id=rid, end=True))
            return time.monotonic()

        writer = asyncio.create_task(write())
        heard = [audio async for audio in sub.completed(timeout_s=120)]
        ended = await writer
    if not heard or heard[0].completed_at is None:
        run.errors += 1
        return
    run.record(sent, reply, heard[0].first_chunk_at, heard[0].completed_at, ended)


async def engine_first_span_ms(replies: tuple[Reply, ...]) -> dict[Reply, float]:
    """The direct path's first audio for each reply's first clause, idle, in this process
    (the in-memory topology: the same stages, no broker): the engine's first span."""
    from streamtts.processors.in_memory import InMemoryTopology
    from streamtts.processors.synthesize.registry import VoiceRegistry
    from streamtts.processors.synthesize.renderer import SegmentRenderer
    from streamtts.processors.synthesize.synthesizer import Synthesizer
    from streamtts.schemas import TTSRequest

    registry = VoiceRegistry(threads=2)
    voices = tuple(dict.fromkeys(r.voice for r in replies))
    langs = tuple(dict.fromkeys(r.lang for r in replies))
    await asyncio.to_thread(registry.warm_up, voices, langs=langs)
    out: dict[Reply, float] = {}
    first_pcm: list[float] = []
    async with InMemoryTopology(
        SegmentRenderer(Synthesizer(registry)),
        on_record=lambda record: (
            first_pcm.append(time.perf_counter()) if record.topic.endswith("tts.pcm") else None
        ),
    ) as memory:
        for n, reply in enumerate([replies[0], *replies]):  # the first render warms the path
            tokens = stream_tokens(reply.text)
            clause = "".join(tokens[: completing_token(tokens, sentence=False)]).strip()
            first_pcm.clear()
            started = time.perf_counter()
            request = TTSRequest.new(clause, voice=reply.voice, language=reply.lang, cache=False)
            await memory.render(request)
            if n:
                out[reply] = (first_pcm[0] - started) * 1000
    return out


async def run_llm_stream_bench(
    rates: tuple[float, ...] = (10.0, 25.0, 50.0),
    rounds: int = 2,
    out_dir: Path = Path("results") / "bench",
    threads: int = 2,
    replies: tuple[Reply, ...] = REPLIES,
) -> list[StreamRun]:
    """Every (language, transport, mode, rate): `rounds` passes over its replies, one at a time."""
    engine = await engine_first_span_ms(replies)
    voices = tuple(dict.fromkeys(r.voice for r in replies))
    langs = tuple(dict.fromkeys(r.lang for r in replies))
    runs = [StreamRun(lang, t, mode, rate) for rate in rates for lang in langs for t, mode in PATHS]
    log_dir = out_dir / "logs" / "llm-stream"
    async with bench_gateway("llm", threads, voices, log_dir) as (pipeline, url):
        for reply in {r.lang: r for r in replies}.values():  # each language's path warm
            await _reply_ws(url, reply, "utterance", 50.0, StreamRun("warm-up", "ws", "utterance", 50.0))
        for run in runs:
            mine = [r for r in replies if r.lang == run.lang]
            run.engine_first_span_ms = [engine[r] for r in mine]
            for _ in range(rounds):
                for reply in mine:
                    with contextlib.suppress(TimeoutError, websockets.ConnectionClosed):
                        async with asyncio.timeout(120):
                            if run.transport == "kafka":
                                await _reply_kafka(pipeline.kafka, reply, run.words_per_s, run)
                            else:
                                await _reply_ws(url, reply, run.mode, run.words_per_s, run)
            print(
                f"[llm-stream] {run.lang} {run.transport} {run.mode} at {run.words_per_s:g}/s: {run.row()}",
                flush=True,
            )
    return runs


def llm_stream_markdown(runs: list[StreamRun]) -> str:
    lines = [
        "| tokens/s | lang | path | replies | first audio after: first token p50 / p95 "
        "| clause complete p50 / p95 | sentence complete p50 | end → last audio p50 "
        "| engine first span p50 |",
        "|--:|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    for run in runs:
        r = run.row()

        def ms(key: str, r: dict[str, Any] = r) -> str:
            return "–" if r[key] is None else f"{r[key]:.0f}"

        lines.append(
            f"| {run.words_per_s:g} | {run.lang} | {run.transport} {run.mode} | {r['replies']} "
            f"| {ms('first_audio_after_first_word_p50_ms')} / {ms('first_audio_after_first_word_p95_ms')} "
            f"| {ms('first_audio_after_clause_p50_ms')} / {ms('first_audio_after_clause_p95_ms')} "
            f"| {ms('first_audio_after_sentence_p50_ms')} | {ms('end_to_last_audio_p50_ms')} "
            f"| {ms('engine_first_span_p50_ms')} |"
        )
    return "\n".join(lines)
