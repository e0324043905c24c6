"""`streamtts bench --barge-in`: voice-agent sessions through the gateway, interrupted.

Each session is what a telephony bridge behind an LLM does: a WebSocket to the gateway
(`/v1/stream`, 8 kHz μ-law, 20 ms media frames, real-time pacing, word timestamps), a reply
streamed as text tokens at LLM speed, the caller barging in after a random amount of audio
(a `cancel` without `played_ms`), then the next reply at once. Worker processes run the
pipeline on fresh topics; the gateway runs in this process.

Measured, client side: sentence end → first frame (a session's first reply, and replies right
after a cancel), cancel → last frame received, audio received after the cancel was sent,
audio beyond the position the gateway says it stopped at, and the error of each cancelled
request's `spoken_ms` against the audio this client received of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import websockets

from streamtts.bench.barge_in import ANSWERS
from streamtts.bench.fresh_workers import bench_gateway
from streamtts.bench.stats import rounded_percentile

FRAME_MS = 20


@dataclass
class AgentStats:
    """What every session measured (milliseconds)."""

    first_reply_ms: list[float] = field(default_factory=list)
    """Sentence end → first frame of a session's first reply."""
    after_cancel_ms: list[float] = field(default_factory=list)
    """The same for a reply sent right after a cancel."""
    cancel_to_last_frame_ms: list[float] = field(default_factory=list)
    audio_after_cancel_ms: list[float] = field(default_factory=list)
    beyond_stop_ms: list[float] = field(default_factory=list)
    """Audio received beyond the position the `cancelled` event names (should be 0)."""
    spoken_error_ms: list[float] = field(default_factory=list)
    cancels: int = 0
    replies: int = 0
    errors: int = 0

    def row(self) -> dict[str, Any]:
        p = rounded_percentile
        return {
            "replies": self.replies,
            "cancels": self.cancels,
            "errors": self.errors,
            "first_frame_first_reply_p50_ms": p(self.first_reply_ms, 50),
            "first_frame_first_reply_p95_ms": p(self.first_reply_ms, 95),
            "first_frame_after_cancel_p50_ms": p(self.after_cancel_ms, 50),
            "first_frame_after_cancel_p95_ms": p(self.after_cancel_ms, 95),
            "cancel_to_last_frame_p50_ms": p(self.cancel_to_last_frame_ms, 50),
            "cancel_to_last_frame_p99_ms": p(self.cancel_to_last_frame_ms, 99),
            "audio_after_cancel_p50_ms": p(self.audio_after_cancel_ms, 50),
            "audio_after_cancel_max_ms": max(self.audio_after_cancel_ms, default=None),
            "beyond_stop_max_ms": max(self.beyond_stop_ms, default=None),
            "spoken_error_p50_ms": p(self.spoken_error_ms, 50),
            "spoken_error_max_ms": max(self.spoken_error_ms, default=None),
        }


async def _stream_tokens(ws: Any, text: str, per_s: float, ends: list[float]) -> None:
    """The LLM: one word at a time; `ends` gets the time each sentence was complete."""
    for word in text.split():
        await ws.send(orjson.dumps({"type": "text", "text": word + " "}).decode())
        if word.endswith((".", "!", "?")):
            ends.append(time.monotonic())
        await asyncio.sleep(1 / per_s)  # the LLM's pace


async def _session(
    url: str, rng: random.Random, until: float, stats: AgentStats, tokens_per_s: float
) -> None:
    start = {
        "type": "start",
        "voice": "en_joe",
        "format": "mulaw",
        "frame_ms": FRAME_MS,
        "pace": "realtime",
        "frames": "media",
        "timestamps": True,
    }
    received_ms = 0.0  # the session clock, as this client counts it
    async with websockets.connect(url, max_size=None) as ws:
        await ws.send(orjson.dumps(start).decode())
        after_cancel = False
        while time.monotonic() < until:
            answer = rng.sample(ANSWERS["en"], k=4)
            ends: list[float] = []
            llm = asyncio.create_task(_stream_tokens(ws, " ".join(answer), tokens_per_s, ends))
            cut_ms = rng.uniform(300.0, 3000.0)
            reply_ms, first = 0.0, True
            starts: dict[str, float] = {}  # request → its start on the session clock
            try:
                while reply_ms < cut_ms:
                    event = orjson.loads(await ws.recv())
                    if event.get("event") == "media":
                        if first and ends:
                            lag = (time.monotonic() - ends[0]) * 1000
                            (stats.after_cancel_ms if after_cancel else stats.first_reply_ms).append(lag)
                            first = False
                        reply_ms += FRAME_MS
                        received_ms += FRAME_MS
                    elif event.get("type") == "words":
                        starts.setdefault(event["request_id"], event["session_offset_ms"])
                    elif event.get("type") == "error":
                        stats.errors += 1
            finally:
                llm.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await llm
            stats.replies += 1
            await ws.send(orjson.dumps({"type": "cancel"}).decode())
            sent_at, after, last_at = time.monotonic(), 0.0, None
            while True:
                event = orjson.loads(await ws.recv())
                if event.get("event") == "media":
                    after += FRAME_MS
                    received_ms += FRAME_MS
                    last_at = time.monotonic()
                elif event.get("type") == "words":
                    starts.setdefault(event["request_id"], event["session_offset_ms"])
                elif event.get("type") == "cancelled":
                    break
            stats.cancels += 1
            stats.cancel_to_last_frame_ms.append(0.0 if last_at is None else (last_at - sent_at) * 1000)
            stats.audio_after_cancel_ms.append(after)
            stats.beyond_stop_ms.append(max(0.0, received_ms - event["position_ms"]))
            for entry in event["requests"]:
                begin = starts.get(entry["request_id"])
                expected = 0.0 if begin is None else max(0.0, received_ms - begin)
                stats.spoken_error_ms.append(round(abs(entry["spoken_ms"] - expected), 1))

            after_cancel = True
        await ws.send(orjson.dumps({"type": "end"}).decode())
        with contextlib.suppress(websockets.ConnectionClosed):
            async with asyncio.timeout(30):
                while orjson.loads(await ws.recv()).get("type") != "done":
                    pass


async def run_agent_bench(
    sessions: int = 3,
    duration_s: float = 60.0,
    seed: int = 11,
    out_dir: Path = Path("results") / "bench",
    threads: int = 2,
    tokens_per_s: float = 40.0,
) -> AgentStats:
    """`sessions` agent sessions for `duration_s` against one worker and an in-process gateway."""
    stats = AgentStats()
    log_dir = out_dir / "logs" / "agents"
    async with bench_gateway("agents", threads, ("en_joe",), log_dir, ws_sessions=sessions + 2) as (_, url):
        until = time.monotonic() + duration_s
        rng = random.Random(seed)
        await asyncio.gather(
            *(_session(url, random.Random(rng.random()), until, stats, tokens_per_s) for _ in range(sessions))
        )
    return stats


def agent_markdown(stats: AgentStats, sessions: int, duration_s: float) -> str:
    r = stats.row()

    def pair(a: str, b: str) -> str:
        return f"{r[a]} / {r[b]} ms" if r[a] is not None else "–"

    return "\n".join(
        [
            "| measure | value |",
            "|---|--:|",
            f"| sessions × duration | {sessions} × {duration_s:g} s |",
            f"| replies / cancels / errors | {r['replies']} / {r['cancels']} / {r['errors']} |",
            "| sentence end → first frame, first reply p50 / p95 | "
            + pair("first_frame_first_reply_p50_ms", "first_frame_first_reply_p95_ms")
            + " |",
            "| sentence end → first frame, reply after a cancel p50 / p95 | "
            + pair("first_frame_after_cancel_p50_ms", "first_frame_after_cancel_p95_ms")
            + " |",
            "| cancel → last frame received p50 / p99 | "
            + pair("cancel_to_last_frame_p50_ms", "cancel_to_last_frame_p99_ms")
            + " |",
            "| audio received after the cancel p50 / max | "
            + pair("audio_after_cancel_p50_ms", "audio_after_cancel_max_ms")
            + " |",
            f"| audio beyond the reported stop position, max | {r['beyond_stop_max_ms']} ms |",
            "| spoken_ms error vs audio received p50 / max | "
            + pair("spoken_error_p50_ms", "spoken_error_max_ms")
            + " |",
        ]
    )
