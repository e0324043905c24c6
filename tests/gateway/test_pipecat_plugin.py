"""The pipecat plugin in a real pipecat pipeline (its `PipelineWorker`, frames as an LLM
service pushes them) against a live gateway and the real pipeline: tokens spoken as they
come, timed words as pipecat's `TTSTextFrame`s, and an interruption that cancels upstream."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from streamtts.integrations.pipecat import StreamTTSService
from tests.gateway.conftest import ACME

pytestmark = [pytest.mark.integration, pytest.mark.model]

REPLY = (
    "Thanks for calling, I can see your order right here. It shipped on Monday, "
    "and it should arrive by Thursday at the latest."
)


def tokens(text: str) -> list[str]:
    return re.findall(r"\s*\S+", text)


FIRST_SENTENCE = len(tokens(REPLY.split(". ")[0]))


class Collector(FrameProcessor):
    """What leaves the TTS service downstream, with events for its audio and its end."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[Frame] = []
        self.audio = asyncio.Event()
        self.stopped = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM:
            self.frames.append(frame)
            if isinstance(frame, TTSAudioRawFrame):
                self.audio.set()
            elif isinstance(frame, TTSStoppedFrame):
                self.stopped.set()
        await self.push_frame(frame, direction)


@asynccontextmanager
async def running(tts: StreamTTSService, collector: Collector) -> AsyncIterator[PipelineWorker]:
    worker = PipelineWorker(Pipeline([tts, collector]), cancel_on_idle_timeout=False)
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _started(worker: Any, frame: Any) -> None:
        started.set()

    runner = WorkerRunner()
    await runner.add_workers(worker)
    run = asyncio.create_task(runner.run())
    async with asyncio.timeout(30):
        await started.wait()
    try:
        yield worker
    finally:
        await worker.queue_frame(EndFrame())
        async with asyncio.timeout(30):
            await run


async def test_pipecat_speaks_tokens_as_the_llm_writes_them(live_gateway_url: str) -> None:
    tts = StreamTTSService(base_url=live_gateway_url, api_key="key-acme", voice="en_joe", language="en")
    collector = Collector()
    words = tokens(REPLY)
    heard_after: int | None = None
    async with running(tts, collector) as worker:
        await worker.queue_frame(LLMFullResponseStartFrame())
        for i, token in enumerate(words):
            await worker.queue_frame(LLMTextFrame(token))
            # An LLM's pace: the first sentence slowly (4 words/s: a stalled machine cannot decide
            # this by timing), the rest at 12 words/s.
            await asyncio.sleep(0.25 if i + 1 < FIRST_SENTENCE else 0.08)
            if heard_after is None and collector.audio.is_set():
                heard_after = i + 1
        await worker.queue_frame(LLMFullResponseEndFrame())
        async with asyncio.timeout(60):
            await collector.stopped.wait()
    first_sentence = FIRST_SENTENCE
    print(
        f"pipecat: first audio after token {heard_after} of {len(words)} (first sentence: {first_sentence})"
    )
    assert heard_after is not None and heard_after < first_sentence, "heard only after its first sentence"
    audio = [f for f in collector.frames if isinstance(f, TTSAudioRawFrame)]
    assert all(f.sample_rate == 24000 and f.num_channels == 1 for f in audio)
    seconds = sum(len(f.audio) for f in audio) / 2 / 24000
    assert seconds > 5.0, seconds
    spoken = [f.text for f in collector.frames if isinstance(f, TTSTextFrame)]
    assert " ".join(spoken).split() == [w.strip(",.") for w in REPLY.split()]


async def test_pipecat_interruption_cancels_the_turn_upstream(live_gateway_url: str) -> None:
    tts = StreamTTSService(base_url=live_gateway_url, api_key="key-acme", voice="en_joe", language="en")
    collector = Collector()
    cancelled = asyncio.Event()
    told: list[tuple[str, float]] = []

    @tts.event_handler("on_turn_cancelled")
    async def _cancelled(service: Any, context_id: str, spoken_ms: float) -> None:
        told.append((context_id, spoken_ms))
        cancelled.set()

    async with running(tts, collector) as worker:
        await worker.queue_frame(LLMFullResponseStartFrame())
        for token in tokens(REPLY):
            await worker.queue_frame(LLMTextFrame(token))
        async with asyncio.timeout(60):
            await collector.audio.wait()  # audio is playing: the user speaks
        context_ids = list(tts.request_ids)
        await worker.queue_frame(InterruptionFrame())
        async with asyncio.timeout(30):
            await cancelled.wait()  # the gateway's `cancelled` event for the turn
    assert context_ids and [ctx for ctx, _ in told] == context_ids
    heard_ms = sum(len(f.audio) for f in collector.frames if isinstance(f, TTSAudioRawFrame)) / 2 / 24
    assert 0 < told[0][1] <= heard_ms + 1, (told, heard_ms)  # spoken: what reached pipecat, at most
    rid = tts.request_ids[context_ids[0]]
    async with httpx.AsyncClient(base_url=live_gateway_url, headers=ACME, timeout=60) as client:
        status = (await client.get(f"/v1/speech/{rid}", params={"wait": 30})).json()
    assert status["status"] == "cancelled", status
