"""Plan once, render once, on the real model: a first segment that misses the render cache is
decoded, resolved and phonemized once on its way through the synthesize stage, and a repeat
is served from the cache without G2P or inference."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from streamtts.processors.direct import warm_cache
from streamtts.processors.segment.planner import plan_segments
from streamtts.processors.segment.span_limits import SpanLimits
from streamtts.processors.synthesize.registry import VoiceRegistry
from streamtts.processors.synthesize.render_cache import MemoryTier, RenderCache
from streamtts.processors.synthesize.renderer import Budgets, SegmentRenderer
from streamtts.processors.synthesize.span_plan import plan_span
from streamtts.processors.synthesize.stage import SynthesizeStage
from streamtts.processors.synthesize.synthesizer import Synthesizer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.stage_outputs import DELIVERED, Delivered
from streamtts.runtime.stage_parts import StageParts
from streamtts.schemas import Segment, TTSRequest, wire
from streamtts.schemas.chunks import PcmChunk
from streamtts.schemas.headers import FIRST_SEGMENT_HEADERS

pytestmark = pytest.mark.model

TEXT = "Thank you for waiting, an agent will be with you shortly."


@dataclass
class Counts:
    """What one record cost: each a list of what was asked for."""

    g2p: list[str] = field(default_factory=list)
    voices: list[object] = field(default_factory=list)
    inferences: list[str] = field(default_factory=list)
    decodes: list[int] = field(default_factory=list)

    def clear(self) -> None:
        for calls in (self.g2p, self.voices, self.inferences, self.decodes):
            calls.clear()


@pytest.fixture
def counts(registry: VoiceRegistry, monkeypatch: pytest.MonkeyPatch) -> Counts:
    """Counts G2P calls (the phonemizer bank the registry hands the Kokoro engine), voice
    resolutions, model runs and segment decodes."""
    seen = Counts()
    bank, engine = registry.g2p, registry.engine(registry.spec("jm_kumo"))
    real_g2p, real_voice_for = bank.phonemize, registry.voice_for
    real_infer, real_decode = engine.synthesize_phonemes, Segment.from_bytes

    def g2p(text: str, lang: str) -> str:
        seen.g2p.append(text)
        return real_g2p(text, lang)

    def voice_for(voice_id: str | None, langs: Any) -> Any:
        seen.voices.append(langs)
        return real_voice_for(voice_id, langs)

    def infer(phonemes: str, voice: Any, speed: float = 1.0) -> Any:
        seen.inferences.append(phonemes)
        return real_infer(phonemes, voice, speed)

    def decode(data: bytes) -> Segment:
        seen.decodes.append(len(data))
        return real_decode(data)

    monkeypatch.setattr(bank, "phonemize", g2p)
    monkeypatch.setattr(registry, "voice_for", voice_for)
    monkeypatch.setattr(engine, "synthesize_phonemes", infer)
    monkeypatch.setattr(Segment, "from_bytes", staticmethod(decode))
    return seen


def _first_segment(registry: VoiceRegistry, text: str = TEXT) -> Segment:
    request = TTSRequest.new(text, voice="jm_kumo", format="pcm")
    segments = plan_segments(
        request, limits=SpanLimits(first_max_chars=120, max_chars=150, max_text_chars=20_000), voices=registry
    )
    return segments[0]


@dataclass
class Message:
    value: bytes
    offset: int
    headers: list[tuple[str, bytes]] = field(default_factory=lambda: list(FIRST_SEGMENT_HEADERS))
    topic: str = "tts.segments"
    partition: int = 0
    key: bytes = b"k"
    generation_id: int = 1

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass
class Event:
    message: Message


class Out:
    """The stage's transport: keeps what was sent (its outputs still checked by its spec)."""

    def __init__(self) -> None:
        self.sent: list[PcmChunk] = []

    async def __call__(self, topic: str, key: bytes | None, value: bytes, headers: object) -> Delivered:
        self.sent.append(wire.decode(PcmChunk, value, headers))
        return DELIVERED


class Manual:
    """The stream's manual acks."""

    def __init__(self) -> None:
        self.acked: list[int] = []

    async def ack(self, event: Event) -> None:
        self.acked.append(event.message.offset)


@pytest.fixture
def stage(registry: VoiceRegistry) -> Iterator[SynthesizeStage]:
    """The synthesize stage with an empty memory cache; it never starts (no Kafka): the test
    drives its record-handling methods directly, as its agent does."""
    registry.warm_up(("jm_kumo",), langs=("en",))  # as a worker starts: a cold G2P would blow its budget
    cache = RenderCache(MemoryTier(32 << 20))
    # Budgets a slow test machine cannot blow: the counts, not the timing, are under test.
    renderer = SegmentRenderer(
        Synthesizer(registry, cache=cache), budgets=Budgets(g2p_s=30.0, inference_base_s=120.0)
    )
    built = SynthesizeStage(StageParts.of(pipeline=PipelineSettings.of(synth_threads=2)), renderer)
    built.sent = Out()  # type: ignore[attr-defined]
    built.send_through(built.sent)  # type: ignore[attr-defined]
    try:
        yield built
    finally:
        built.release()
        renderer.close()


async def _through_stage(stage: SynthesizeStage, segment: Segment, offset: int) -> tuple[bool, Event]:
    """One first-segment record as the agent handles it: the cache lookup, then (a miss)
    the model path. Returns whether the lookup served it."""
    event = Event(Message(segment.to_bytes(), offset))
    manual = Manual()
    taken = await stage.take(event)  # type: ignore[arg-type]
    await stage.process(taken, manual)  # type: ignore[arg-type]  # at once if served, else as the drain does
    assert manual.acked == [offset]
    return taken.now, event


async def test_a_first_segment_missing_the_cache_is_planned_once_and_a_repeat_costs_no_g2p(
    stage: SynthesizeStage, registry: VoiceRegistry, counts: Counts
) -> None:
    segment = _first_segment(registry)
    counts.clear()
    served, _ = await _through_stage(stage, segment, offset=0)
    assert not served, "an empty cache serves nothing"
    assert counts.decodes == [len(segment.to_bytes())], "decoded once, by the cache lookup"
    assert counts.voices == [frozenset({"en"})], "the voice is resolved once"
    assert counts.g2p == [segment.text], "G2P runs once: the model path renders the lookup's plan"
    assert len(counts.inferences) == 1
    first = [c for c in stage.sent.sent if c.pcm]  # type: ignore[attr-defined]
    assert first and {c.cache for c in first} == {"miss"}

    counts.clear()
    again = _first_segment(registry)  # another request saying the same
    served, _ = await _through_stage(stage, again, offset=1)
    assert served, "the repeat is served by the cache lookup"
    assert counts.g2p == [] and counts.inferences == [], "a hit needs neither G2P nor the model"
    assert counts.decodes == [len(again.to_bytes())] and counts.voices == [frozenset({"en"})]
    hit = [c for c in stage.sent.sent[len(first) :] if c.pcm]  # type: ignore[attr-defined]
    assert {c.cache for c in hit} == {"hit"}
    assert b"".join(c.pcm for c in hit) == b"".join(c.pcm for c in first)


def test_a_plan_is_reused_only_for_its_own_segment(registry: VoiceRegistry) -> None:
    renderer = SegmentRenderer(Synthesizer(registry))
    try:
        segment = _first_segment(registry, "Hello there.")
        plan = plan_span(renderer.synth, segment)
        with pytest.raises(ValueError, match="only for the segment"):
            renderer.render(_first_segment(registry, "Hello there."), plan)
    finally:
        renderer.close()


def test_warming_plans_the_keys_the_pipeline_looks_up(registry: VoiceRegistry) -> None:
    """`cache warm` plans with the pipeline's planner: what it stored, the stage's cache
    lookup finds (same segments, same plans, same keys)."""
    synth = Synthesizer(registry, cache=RenderCache(MemoryTier(32 << 20)))
    renderer = SegmentRenderer(synth)
    try:
        text = "Your call is important to us. 请稍候。"
        request = TTSRequest.new(text, voice="jm_kumo", format="pcm")
        segments = plan_segments(
            request,
            limits=SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=20_000),
            voices=registry,
        )
        assert [s.lang for s in segments] == ["en", "zh"]
        assert all(renderer.look_up(s).rendered is None for s in segments)
        assert warm_cache(synth, text, voice_id="jm_kumo") == (2, 0)
        assert warm_cache(synth, text, voice_id="jm_kumo") == (0, 2)
        assert all(renderer.look_up(s).rendered is not None for s in segments)
    finally:
        renderer.close()
