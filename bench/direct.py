"""The baseline: the same texts through the pipeline's own stages in this process, with no broker
(`processors.in_memory`: segment → synthesize → encode, the handlers the workers run), one at a
time and on the same engine and thread budget — what the workers do, minus Kafka and the hops.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from streamtts.bench.stats import RequestRecord
from streamtts.bench.workloads import WorkItem

if TYPE_CHECKING:  # the speech stack loads in `DirectSynth`, not at import
    from streamtts.processors.in_memory import InMemoryTopology
    from streamtts.runtime.loop_record import LoopRecord

REQUEST_SAMPLE_RATE = 24_000
"""The request contract's default output rate; the pipeline resamples to it, so the baseline does."""


class DirectSynth:
    """Loads and warms the engines once; `run` times each text from its request to its first
    encoded chunk and to its last."""

    def __init__(self, threads: int, voices: Sequence[str]) -> None:
        import streamtts.processors.synthesize  # noqa: F401  (disables onnxruntime telemetry first)
        from streamtts.processors.synthesize.registry import VoiceRegistry
        from streamtts.processors.synthesize.renderer import Budgets, SegmentRenderer
        from streamtts.processors.synthesize.synthesizer import Synthesizer

        self.registry = VoiceRegistry(threads=threads)
        # The same warm-up as a worker (build_renderer), so neither side pays a cold phonemizer.
        self.registry.warm_up(tuple(voices), langs=("zh", "en", "ja", "ko"))
        self.synth = Synthesizer(self.registry)
        # No time budgets: one text at a time, nothing else waits (the direct path never had them).
        self.renderer = SegmentRenderer(self.synth, budgets=Budgets.unbounded())
        self._current: RequestRecord | None = None
        """The request being timed (its first chunk is noted by `_heard`)."""
        self._audio = ""
        """The audio topic's name in the topology running now."""

    def voice_languages(self, voice: str) -> frozenset[str]:
        return self.registry.spec(voice).languages

    def close(self) -> None:
        self.renderer.close()

    def _heard(self, record: LoopRecord) -> None:
        """The first encoded chunk of the request being timed is its first audio."""
        rec = self._current
        if rec is not None and rec.first_chunk_at is None and record.topic == self._audio:
            rec.first_chunk_at = time.monotonic()

    async def run(
        self,
        items: Sequence[WorkItem],
        voice: str,
        *,
        deadline: float,
        fmt: str = "mp3",
        say: Callable[[str], None] | None = None,
    ) -> list[RequestRecord]:
        from streamtts.processors.in_memory import InMemoryTopology

        # One request at a time, one inference at a time: no lanes (a lone first span never
        # waits for one anyway).
        async with InMemoryTopology(self.renderer, lanes=False, on_record=self._heard) as topology:
            self._audio = topology.topics.audio
            await topology.warm()  # as a segment worker warms at start
            # Warm the exact path once (first mp3 encode, first call of this voice), untimed.
            await self._one(topology, items[0], voice, fmt)
            out = []
            for n, item in enumerate(items, 1):
                if time.monotonic() > deadline:
                    break
                out.append(await self._one(topology, item, voice, fmt))
                if say and n % 10 == 0:
                    say(f"{n}/{len(items)} texts")
        return out

    async def _one(self, topology: InMemoryTopology, item: WorkItem, voice: str, fmt: str) -> RequestRecord:
        from streamtts.schemas import TTSRequest

        request = TTSRequest.new(
            item.text,
            language=item.request_language,
            voice=voice,
            format=fmt,
            sample_rate=REQUEST_SAMPLE_RATE,
            cache=False,
        )
        rec = self._current = RequestRecord(
            request.request_id, len(item.text), item.lang, item.kind, sent_at=time.monotonic()
        )
        try:
            chunks = await topology.render(request)
        finally:
            self._current = None
        rec.audio_done_at = rec.result_at = time.monotonic()
        rec.audio_s = sum(c.duration_ms for c in chunks) / 1000
        rec.degraded = sum(c.degradation is not None for c in chunks if c.part == 0)
        rec.spans = sum(c.part == 0 for c in chunks)
        return rec
