"""Synthesize stage: tts.segments → tts.pcm (faust).

Inference is CPU-bound, so it runs in a bounded executor: the event loop keeps heartbeating
while the model works, and because the agent awaits each segment, a busy worker stops
pulling from its (bounded) stream buffer — back-pressure instead of an unbounded queue.
One agent per process keeps each request's segments in order; scale out with processes.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from processors.stage import FaustStage
from processors.synthesize.chunker import pcm_chunks
from processors.synthesize.renderer import SegmentRenderer
from schemas import ContractError, Segment
from streamtts.jsonlog import log_event
from streamtts.settings import KafkaSettings, PipelineSettings
from streamtts.topics import TopicNames


class SynthesizeStage(FaustStage):
    name = "synthesize"

    def __init__(
        self,
        kafka: KafkaSettings,
        pipeline: PipelineSettings,
        renderer: SegmentRenderer,
        topics: TopicNames | None = None,
    ) -> None:
        super().__init__(kafka, pipeline, topics)
        self.renderer = renderer
        self.out = self.topic(self.topics.pcm)
        self.pool = ThreadPoolExecutor(max_workers=max(1, pipeline.synth_workers), thread_name_prefix="synth")
        self.app.agent(self.topic(self.topics.segments), name="synthesize")(self._agent)
        self.last_output_at: float | None = None
        """Monotonic time of the last PCM chunk sent (tests assert streaming with it)."""

    async def handle(self, event: Any) -> None:
        try:
            segment = Segment.from_bytes(event.message.value)
        except ContractError as err:
            await self.dead_letter(event, err)
            return
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        try:
            rendered = await loop.run_in_executor(self.pool, self.renderer.render, segment)
            chunks = pcm_chunks(segment, rendered, self.pipeline.chunk_max_ms)
        except Exception as err:  # a bug, not bad input: dead-letter, keep the stage flowing
            await self.dead_letter(event, err, request_id=segment.request_id, tenant=segment.request.tenant)
            return
        key = segment.request_id.encode()
        for chunk in chunks:
            await self.out.send(key=key, value=chunk.to_bytes())
        audio_s = len(rendered.samples) / rendered.sample_rate
        log_event(
            self.log,
            "synthesized",
            request_id=segment.request_id,
            tenant=segment.request.tenant,
            stage=self.name,
            seq=segment.seq,
            total=segment.total,
            voice=rendered.voice_used,
            lang=segment.lang,
            audio_s=round(audio_s, 3),
            parts=len(chunks),
            rtf=round(rendered.synth_ms / 1000 / audio_s, 3) if audio_s else None,
            degraded=rendered.degradation.reason if rendered.degradation else None,
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    async def stop(self) -> None:
        await super().stop()
        self.pool.shutdown(wait=True, cancel_futures=True)
