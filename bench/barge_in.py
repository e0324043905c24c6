"""`streamtts bench --barge-in`: voice-agent load where callers interrupt.

The same Poisson schedule of long answers (six sentences) runs twice per voice, side by side:
**none** (every answer plays out) and **barge-in** (half the requests, drawn once, are
cancelled the moment their first chunk reaches the client). All output is 8 kHz μ-law, the
telephony format, so the time to first audio is the first-frame latency of a phone call.

Measured per run: time from the cancel to the last audio chunk the pipeline published for
that request (0 when nothing more came), the worker CPU seconds per request (what cancels
save), and the time to first audio of every request (subscriber side).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from streamtts.bench.bench_facts import say
from streamtts.bench.fresh_workers import Scenario, ScenarioPlan
from streamtts.bench.stats import rounded_percentile
from streamtts.bench.worker_procs import UsageWindow
from streamtts.producers.request_producer import RequestProducer
from streamtts.runtime.kafka import attach_at_end, make_consumer, partitions_of
from streamtts.runtime.settings import Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import AudioChunk, CompletionResult, ContractError, TTSRequest, wire

ANSWERS = {
    "en": [
        "Thanks for waiting, I have found your booking.",
        "Your flight leaves tomorrow morning at nine fifteen from terminal two.",
        "Boarding starts forty minutes before departure, so please arrive early.",
        "You can check in online from twenty four hours before the flight.",
        "Your seat is by the window, and one bag is included in the fare.",
        "If you would like to change anything, just tell me now.",
    ],
    "zh": [
        "感谢您的等待，我已经找到了您的订单。",
        "您的航班明天早上九点十五分从二号航站楼出发。",
        "登机会在起飞前四十分钟开始，请提前到达。",
        "您可以在起飞前二十四小时开始网上值机。",
        "您的座位靠窗，票价包含一件托运行李。",
        "如果您需要修改，请现在告诉我。",
    ],
}
VOICE_LANG = {"en_joe": "en", "jm_kumo": "zh"}


@dataclass
class _Record:
    request: TTSRequest
    cancel: bool
    sent_at: float = 0.0
    first_at: float | None = None
    cancel_at: datetime | None = None
    last_audio_at: datetime | None = None
    result: CompletionResult | None = None


@dataclass
class BargeRun:
    voice: str
    mode: str
    rate: float
    records: list[_Record] = field(default_factory=list)
    cpu_s: float = 0.0

    def row(self) -> dict[str, Any]:
        done = [r for r in self.records if r.result is not None]
        ttfa = [r.first_at - r.sent_at for r in self.records if r.first_at is not None]
        stops = [
            max(0.0, (r.last_audio_at - r.cancel_at).total_seconds()) if r.last_audio_at else 0.0
            for r in self.records
            if r.cancel_at is not None
        ]
        return {
            "voice": self.voice,
            "mode": self.mode,
            "rate": self.rate,
            "sent": len(self.records),
            "completed": sum(1 for r in done if r.result and r.result.status == "completed"),
            "cancelled": sum(1 for r in done if r.result and r.result.status == "cancelled"),
            "lost": len(self.records) - len(done),
            "ttfa_p50_s": rounded_percentile(ttfa, 50, 3),
            "ttfa_p99_s": rounded_percentile(ttfa, 99, 3),
            "cancel_to_last_audio_p50_s": rounded_percentile(stops, 50, 3),
            "cancel_to_last_audio_p99_s": rounded_percentile(stops, 99, 3),
            "cpu_s_per_request": round(self.cpu_s / max(1, len(self.records)), 3),
            "audio_s_spoken": round(
                sum((r.result.spoken_ms or r.result.duration_ms) for r in done if r.result) / 1000, 1
            ),
        }


async def _scenario(scenario: Scenario, schedule: Sequence[float], cancel: Sequence[bool]) -> BargeRun:
    voice, mode = scenario.voice, scenario.mode
    async with scenario.workers({"STREAMTTS_RENDER_CACHE": "0"}) as (prefix, workers):
        kafka = dataclasses.replace(scenario.settings.kafka, topic_prefix=prefix)
        topics = TopicNames(prefix)
        audio = make_consumer(kafka, group_id=None, auto_offset_reset="latest")
        results = make_consumer(kafka, group_id=None, auto_offset_reset="latest")
        all_done = asyncio.Event()
        sending = True
        producer = RequestProducer(kafka)
        text = " ".join(ANSWERS[VOICE_LANG[voice]])
        run = BargeRun(voice, mode, scenario.rate)
        by_id: dict[str, _Record] = {}
        tasks: list[asyncio.Task[None]] = []
        try:
            await producer.start()
            for consumer, topic in ((audio, topics.audio), (results, topics.results)):
                # Attached at the end before anything is sent (fresh topics: nothing is missed).
                await consumer.start()
                await attach_at_end(consumer, await partitions_of(kafka, [topic]))
            warm = TTSRequest.new("One moment.", voice=voice, format="mulaw")
            await producer.submit(warm)

            async def read_audio() -> None:
                async for record in audio:
                    with contextlib.suppress(ContractError):
                        chunk = wire.decode(AudioChunk, record.value, record.headers)
                        rec = by_id.get(chunk.request_id)
                        if rec is None:
                            continue
                        if rec.first_at is None:
                            rec.first_at = time.monotonic()
                            if rec.cancel and mode == "barge-in":  # the caller speaks over it
                                rec.cancel_at = datetime.now(UTC)
                                await producer.cancel(chunk.request_id, chunk.tenant)
                        if not chunk.cancelled and chunk.audio:
                            rec.last_audio_at = chunk.encoded_at

            async def read_results() -> None:
                async for record in results:
                    with contextlib.suppress(ContractError):
                        result = CompletionResult.from_bytes(record.value)
                        if result.request_id in by_id:
                            by_id[result.request_id].result = result
                        if not sending and all(r.result is not None for r in run.records):
                            all_done.set()

            tasks = [asyncio.create_task(read_audio()), asyncio.create_task(read_results())]
            usage = UsageWindow(workers.pids).start()
            started = time.monotonic()
            for i, (at, drop) in enumerate(zip(schedule, cancel, strict=True)):
                await asyncio.sleep(max(0.0, started + at - time.monotonic()))
                request = TTSRequest.new(text, voice=voice, format="mulaw", request_id=f"{prefix}{i}")
                rec = _Record(request, drop, sent_at=time.monotonic())
                by_id[request.request_id] = rec
                run.records.append(rec)
                await producer.submit(request)
            sending = False
            if all(r.result is not None for r in run.records):
                all_done.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_done.wait(), scenario.drain_s)
            used = usage.stop()
            run.cpu_s = sum(u.cpu_s for u in used.values())
        finally:
            for task in tasks:
                task.cancel()
            for consumer in (audio, results):
                await consumer.stop()
            await producer.stop()
    row = run.row()
    say(
        f"{voice} {mode}: {row['completed']} completed, {row['cancelled']} cancelled, {row['lost']} lost; "
        f"TTFA p50 {row['ttfa_p50_s']} s p99 {row['ttfa_p99_s']} s; cancel→last audio p50 "
        f"{row['cancel_to_last_audio_p50_s']} s p99 {row['cancel_to_last_audio_p99_s']} s; "
        f"{row['cpu_s_per_request']} CPU s/request"
    )
    return run


async def run_barge_in_bench(plan: ScenarioPlan) -> list[BargeRun]:
    """none and barge-in per voice, on the same schedule and the same cancelled half."""
    settings = Settings.from_env()
    runs: list[BargeRun] = []
    for voice in plan.voices:
        rng, schedule = plan.schedule(voice)
        cancel = [rng.random() < 0.5 for _ in schedule]
        for mode in ("none", "barge-in"):
            runs.append(await _scenario(plan.scenario(settings, "barge", voice, mode), schedule, cancel))
    return runs


def markdown(runs: Sequence[BargeRun]) -> str:
    lines = [
        "| voice @ rate | mode | done / cancelled / lost | TTFA p50 / p99 (8 kHz μ-law) "
        "| cancel → last audio p50 / p99 | CPU s/request |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for run in runs:
        r = run.row()
        stop = (
            f"{r['cancel_to_last_audio_p50_s']} / {r['cancel_to_last_audio_p99_s']} s"
            if r["cancel_to_last_audio_p50_s"] is not None
            else "–"
        )
        lines.append(
            f"| {r['voice']} @ {r['rate']} req/s | {r['mode']} "
            f"| {r['completed']} / {r['cancelled']} / {r['lost']} "
            f"| {r['ttfa_p50_s']} / {r['ttfa_p99_s']} s | {stop} | {r['cpu_s_per_request']} |"
        )
    return "\n".join(lines)
