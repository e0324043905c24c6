"""`streamtts bench --llm-stream`: replies streamed as an LLM writes them, through the gateway.

Each reply is sent word by word over `WS /v1/stream` at a fixed pace (10, 25, 50 words/s;
8 in the quick run), one at a time, against a pipeline of worker processes on fresh topics
and a gateway in this process. Two ways of turning the text into requests run side by side:

- `utterance` (the default): the turn is one streamed utterance; the segment stage speaks its
  first clause as soon as it is whole;
- `sentence` (the earlier behaviour): each complete sentence is a request of its own.

Per reply, measured by this client: first audio after the first word was sent, after the first
clause was complete (the word that completed it), and after the first sentence was complete;
and the last audio after `end`. The engine's own time for the first clause, rendered idle in
this process (`engine_first_span_ms`), is the floor any TTS that waits for that clause pays:
the target is first audio ≤ clause complete + that + 150 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import websockets

from streamtts.bench.stats import percentile
from streamtts.bench.worker_procs import Topology, WorkerSet
from streamtts.gateway.app import create_app
from streamtts.gateway.server import GatewayServer
from streamtts.gateway.settings import GatewaySettings, RateLimit
from streamtts.runtime.settings import Settings

KEY = "bench-llm-key"
MODES = ("utterance", "sentence")

REPLIES = [
    # A long first sentence (~180 characters) with a clause boundary after ~20: the case the
    # sentence-at-a-time path serves worst.
    "Thanks for holding, I have pulled up the order you placed on the website last Tuesday "
    "evening and I can see that the warehouse packed it yesterday but the courier has not "
    "scanned it yet. It should move today. Is there anything else?",
    "Sure, I can help with that. Your refund of forty two dollars was approved this morning, "
    "and it usually reaches your card within three to five business days. Anything else?",
    "Of course, let me check that for you. The store on Main Street is open until nine tonight, "
    "and the one downtown closes at eight. Would you like directions?",
    "I understand, that sounds frustrating. I have escalated the ticket to our technical team, "
    "and someone will call you back within two hours. Thank you for your patience.",
]

_CLAUSE = re.compile(r"[,;:.!?](\s|$)")
_SENTENCE = re.compile(r"[.!?](\s|$)")


def words_of(text: str) -> list[str]:
    """The reply as an LLM streams it: each word with its leading space."""
    return re.findall(r"\s*\S+", text)


def completing_word(words: list[str], pattern: re.Pattern[str], min_chars: int = 12) -> int:
    """Index of the word whose arrival completes the first clause (or sentence) of at least
    `min_chars` characters: the word after the one carrying the mark (the mark is final only
    once the next word shows it is no "3." of "3.5")."""
    text = ""
    for i, word in enumerate(words):
        text += word
        for m in pattern.finditer(text):
            if m.start() + 1 >= min_chars and m.end() < len(text):
                return i
    return len(words) - 1


@dataclass
class StreamRun:
    mode: str
    words_per_s: float
    after_first_word_ms: list[float] = field(default_factory=list)
    after_clause_ms: list[float] = field(default_factory=list)
    after_sentence_ms: list[float] = field(default_factory=list)
    end_to_last_ms: list[float] = field(default_factory=list)
    engine_first_span_ms: list[float] = field(default_factory=list)
    errors: int = 0

    def row(self) -> dict[str, Any]:
        def p(values: list[float], q: float) -> float | None:
            return round(percentile(values, q), 1) if values else None

        return {
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


async def _reply(url: str, text: str, mode: str, words_per_s: float, run: StreamRun) -> None:
    words = words_of(text)
    clause_at = completing_word(words, _CLAUSE)
    sentence_at = completing_word(words, _SENTENCE, min_chars=1)
    sent: dict[int, float] = {}
    start = {"type": "start", "voice": "en_joe", "language": "en", "format": "pcm", "aggregation": mode}
    async with websockets.connect(url, max_size=None) as ws:
        await ws.send(orjson.dumps(start).decode())

        async def write() -> float:
            for i, word in enumerate(words):
                await ws.send(orjson.dumps({"type": "text", "text": word}).decode())
                sent[i] = time.monotonic()
                await asyncio.sleep(1 / words_per_s)  # the LLM's pace
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
    run.after_first_word_ms.append((first - sent[0]) * 1000)
    run.after_clause_ms.append((first - sent[clause_at]) * 1000)
    run.after_sentence_ms.append((first - sent[sentence_at]) * 1000)
    run.end_to_last_ms.append((last - ended) * 1000)


async def engine_first_span_ms(texts: list[str]) -> list[float]:
    """The direct path's first audio for each reply's first clause, idle, in this process
    (Piper, the in-memory topology: the same stages, no broker): the engine's first span."""
    from streamtts.processors.in_memory import InMemoryTopology
    from streamtts.processors.synthesize.registry import VoiceRegistry
    from streamtts.processors.synthesize.renderer import SegmentRenderer
    from streamtts.processors.synthesize.synthesizer import Synthesizer
    from streamtts.schemas import TTSRequest

    registry = VoiceRegistry(threads=2)
    await asyncio.to_thread(registry.warm_up, ("en_joe",), langs=("en",))
    out = []
    first_pcm: list[float] = []
    async with InMemoryTopology(
        SegmentRenderer(Synthesizer(registry)),
        on_record=lambda record: (
            first_pcm.append(time.perf_counter()) if record.topic.endswith("tts.pcm") else None
        ),
    ) as memory:
        for text in [texts[0], *texts]:  # the first render warms the path: not counted
            words = words_of(text)
            clause = "".join(words[: completing_word(words, _CLAUSE)]).strip()
            first_pcm.clear()
            started = time.perf_counter()
            await memory.render(TTSRequest.new(clause, voice="en_joe", language="en", cache=False))
            out.append((first_pcm[0] - started) * 1000)
    return out[1:]


async def run_llm_stream_bench(
    rates: tuple[float, ...] = (10.0, 25.0, 50.0),
    rounds: int = 2,
    out_dir: Path = Path("results") / "bench",
    threads: int = 2,
) -> list[StreamRun]:
    """Every (mode, rate): `rounds` passes over `REPLIES`, one reply at a time."""
    from streamtts.bench.bench_facts import apply_bench_topics, drop_bench_topics

    engine = await engine_first_span_ms(REPLIES)
    settings = Settings.from_env()
    prefix = f"benchllm{time.strftime('%H%M%S')}-"
    await apply_bench_topics(settings, prefix)
    env = {**os.environ, "STREAMTTS_TOPIC_PREFIX": prefix, "STREAMTTS_RENDER_CACHE": "0"}
    log_dir = out_dir / "logs" / "llm-stream"
    log_dir.mkdir(parents=True, exist_ok=True)
    workers = WorkerSet(Topology(1, threads, warm_voices=("en_joe",)), env, log_dir)
    pipeline = dataclasses.replace(settings, kafka=dataclasses.replace(settings.kafka, topic_prefix=prefix))
    gw = GatewaySettings(api_keys={KEY: "bench"}, default_rate=RateLimit(per_s=100.0, burst=200.0))
    server = GatewayServer(create_app(gw, pipeline))
    runs = [StreamRun(mode, rate) for rate in rates for mode in MODES]
    await asyncio.to_thread(workers.start)
    try:
        await server.start()
        url = f"ws://127.0.0.1:{server.port}/v1/stream?api_key={KEY}"
        await _reply(url, REPLIES[1], "utterance", 50.0, StreamRun("warm-up", 50.0))
        for run in runs:
            run.engine_first_span_ms = list(engine)
            for _ in range(rounds):
                for text in REPLIES:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(120):
                            await _reply(url, text, run.mode, run.words_per_s, run)
            print(f"[llm-stream] {run.mode} at {run.words_per_s:g} words/s: {run.row()}", flush=True)
    finally:
        await server.stop()
        await asyncio.to_thread(workers.stop)
        await drop_bench_topics(settings, prefix)
    return runs


def llm_stream_markdown(runs: list[StreamRun]) -> str:
    lines = [
        "| words/s | mode | replies | first audio after: first word p50 / p95 | clause complete p50 / p95 "
        "| sentence complete p50 | end → last audio p50 | engine first span p50 |",
        "|--:|---|--:|--:|--:|--:|--:|--:|",
    ]
    for run in runs:
        r = run.row()

        def ms(key: str, r: dict[str, Any] = r) -> str:
            return "–" if r[key] is None else f"{r[key]:.0f}"

        lines.append(
            f"| {run.words_per_s:g} | {run.mode} | {r['replies']} "
            f"| {ms('first_audio_after_first_word_p50_ms')} / {ms('first_audio_after_first_word_p95_ms')} "
            f"| {ms('first_audio_after_clause_p50_ms')} / {ms('first_audio_after_clause_p95_ms')} "
            f"| {ms('first_audio_after_sentence_p50_ms')} | {ms('end_to_last_audio_p50_ms')} "
            f"| {ms('engine_first_span_p50_ms')} |"
        )
    return "\n".join(lines)
