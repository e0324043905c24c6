"""Render cache: content addressed (a model or voice change never serves an old render),
bounded, and byte-identical to rendering without it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from streamtts.processors.synthesize.engine import AudioChunk, VoiceSpec
from streamtts.processors.synthesize.registry import VoiceRegistry
from streamtts.processors.synthesize.render_cache import (
    MemoryTier,
    RenderCache,
    decode_render,
    encode_render,
    render_key,
)
from streamtts.processors.synthesize.synthesizer import Synthesizer


@dataclass
class FakeEngine:
    name: str = "kokoro"
    model_id: str = "model-a"


def spec(style_value: float | None) -> VoiceSpec:
    style = None if style_value is None else np.full((510, 1, 256), style_value, np.float32)
    return VoiceSpec("v", "kokoro", frozenset({"en"}), 24_000, 1.0, style)


def test_the_key_covers_everything_that_changes_the_samples() -> None:
    base = render_key(FakeEngine(), spec(0.1), 1.0, "hˈɛloʊ")  # type: ignore[arg-type]
    assert base == render_key(FakeEngine(), spec(0.1), 1.0, "hˈɛloʊ")  # type: ignore[arg-type]
    changed = [
        render_key(FakeEngine(model_id="model-b"), spec(0.1), 1.0, "hˈɛloʊ"),  # type: ignore[arg-type]
        render_key(FakeEngine(name="piper:x"), spec(0.1), 1.0, "hˈɛloʊ"),  # type: ignore[arg-type]
        render_key(FakeEngine(), spec(0.2), 1.0, "hˈɛloʊ"),  # type: ignore[arg-type]
        render_key(FakeEngine(), spec(None), 1.0, "hˈɛloʊ"),  # type: ignore[arg-type]
        render_key(FakeEngine(), spec(0.1), 1.1, "hˈɛloʊ"),  # type: ignore[arg-type]
        render_key(FakeEngine(), spec(0.1), 1.0, "hˈɛlo"),  # type: ignore[arg-type]
    ]
    assert len({base, *changed}) == 7


def test_entries_round_trip_and_corrupt_ones_are_misses() -> None:
    chunks = [
        AudioChunk(
            np.linspace(-1, 1, 100, dtype=np.float32), 24_000, "ab", bounds=np.array([[0, 40], [40, 100]])
        ),
        AudioChunk(np.zeros(3), 22_050, ""),
    ]
    back = decode_render(encode_render(chunks), "v")
    assert [(c.sample_rate, c.phonemes) for c in back] == [(24_000, "ab"), (22_050, "")]
    assert all(np.array_equal(a.samples, b.samples) for a, b in zip(chunks, back, strict=True))
    # The phoneme bounds come back too: a cached span still has word timestamps.
    assert back[0].bounds is not None and back[0].bounds.tolist() == [[0, 40], [40, 100]]
    assert back[1].bounds is None
    cache = RenderCache(MemoryTier(1 << 20))
    cache.memory.put("k", encode_render(chunks)[:-3])
    assert cache.lookup("k", "v") is None


def test_memory_is_bounded_in_bytes_and_evicts_the_least_recently_used() -> None:
    counted: list[tuple[str, str, int]] = []
    cache = RenderCache(MemoryTier(3000), on_count=lambda k, t, n: counted.append((k, t, n)))
    one = [AudioChunk(np.zeros(300, np.float32), 24_000, "")]  # ~1.2 KB encoded
    cache.store("a", one)
    cache.store("b", one)
    assert cache.lookup("a", "v") is not None  # a is now the most recent
    cache.store("c", one)  # evicts b
    assert cache.lookup("b", "v") is None and cache.lookup("a", "v") is not None
    assert cache.memory.size_bytes <= 3000
    assert cache.stats["evictions"]["memory"] == 1 and ("evictions", "memory", 1) in counted


@pytest.mark.model
@pytest.mark.parametrize(
    ("voice", "text", "lang", "rate"),
    [("jm_kumo", "欢迎致电。", "zh", None), ("jm_kumo", "Hello there.", "en", 16_000)],
)
def test_cached_audio_is_byte_identical_to_uncached(
    registry: VoiceRegistry, voice: str, text: str, lang: str, rate: int | None
) -> None:
    plain = Synthesizer(registry)
    cached = Synthesizer(registry, cache=RenderCache(MemoryTier(64 << 20)))
    v = plain.resolve(voice, lang)
    phonemes = plain.phonemize(v, [(text, lang)])
    reference, status = plain.render_cached(phonemes, v, 1.0, rate, pause_after_ms=80)
    assert status == "off"
    first, s1 = cached.render_cached(phonemes, v, 1.0, rate, pause_after_ms=80)
    second, s2 = cached.render_cached(phonemes, v, 1.0, rate, pause_after_ms=80)
    assert (s1, s2) == ("miss", "hit")
    for chunks in (first, second):
        assert b"".join(c.int16.tobytes() for c in chunks) == b"".join(c.int16.tobytes() for c in reference)


@pytest.mark.model
def test_another_voice_or_a_bypass_never_gets_the_cached_render(registry: VoiceRegistry) -> None:
    synth = Synthesizer(registry, cache=RenderCache(MemoryTier(64 << 20)))
    kumo = synth.resolve("jm_kumo", "en")
    blend = synth.resolve("jm_kumo:0.5+jf_alpha:0.5", "en")
    phonemes = synth.phonemize(kumo, [("Thank you.", "en")])
    a, _ = synth.render_cached(phonemes, kumo)
    b, status = synth.render_cached(phonemes, blend)
    assert status == "miss"
    same = a[0].samples.shape == b[0].samples.shape and np.array_equal(a[0].samples, b[0].samples)
    assert not same
    assert synth.render_cached(phonemes, kumo, use_cache=False)[1] == "off"
    assert synth.render_cached(phonemes, kumo)[1] == "hit"


@pytest.mark.model
def test_piper_renders_are_cached_as_first_produced(registry: VoiceRegistry) -> None:
    synth = Synthesizer(registry, cache=RenderCache(MemoryTier(64 << 20)))
    joe = synth.resolve("en_joe", "en")
    phonemes = synth.phonemize(joe, [("Please hold the line.", "en")])
    first, s1 = synth.render_cached(phonemes, joe)
    again, s2 = synth.render_cached(phonemes, joe)
    assert (s1, s2) == ("miss", "hit")
    assert np.array_equal(first[0].samples, again[0].samples)
