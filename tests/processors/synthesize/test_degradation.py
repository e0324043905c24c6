"""Graceful degradation on the real model: budgets, fallback voice, please-wait clip, breaker."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import numpy as np
import pytest

from streamtts.processors.synthesize.breaker import CircuitBreaker
from streamtts.processors.synthesize.renderer import Budgets, SegmentRenderer
from streamtts.processors.synthesize.synthesizer import Synthesizer
from streamtts.schemas import RequestContext, Segment, TTSRequest

pytestmark = pytest.mark.model


def _segment(text: str, lang: str, *, voice: str = "auto", language: str = "auto", seq: int = 0) -> Segment:
    req = TTSRequest.new(text, voice=voice, language=language)
    return Segment(
        request_id=req.request_id,
        seq=seq,
        total=seq + 1,
        last=True,
        text=text,
        lang=lang,  # type: ignore[arg-type]
        request=RequestContext.of(req),
        segmented_at=datetime.now(UTC),
    )


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_breaker_opens_after_threshold_then_half_open_probe_closes_it() -> None:
    clock = FakeClock()
    b = CircuitBreaker(threshold=3, open_s=5.0, clock=clock)
    key = ("v", "en")
    for _ in range(2):
        assert b.allow(key)
        b.record_degradation(key)
    assert b.state(key) == "closed"
    b.record_degradation(key)
    assert b.state(key) == "open" and not b.allow(key)
    clock.now += 5.1
    assert b.state(key) == "half_open"
    assert b.allow(key) and not b.allow(key), "exactly one probe while half-open"
    b.record_degradation(key)  # the probe failed: open again
    assert b.state(key) == "open"
    clock.now += 5.1
    assert b.allow(key)
    b.record_success(key)
    assert b.state(key) == "closed" and b.allow(key)


def test_g2p_stall_degrades_within_budget(registry, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    renderer = SegmentRenderer(Synthesizer(registry), budgets=Budgets(g2p_s=0.2))
    renderer.prerender_please_wait(langs=("ja", "en"))
    ja = registry.g2p.get("ja")
    release = threading.Event()

    def stalled(text: str) -> str:  # field failure: a phoneme parser that hangs for seconds
        release.wait(3.0)
        return ja(text)

    monkeypatch.setitem(registry.g2p._by_lang, "ja", stalled)
    try:
        started = time.perf_counter()
        out = renderer.render(_segment("こんにちは、元気ですか。", "ja", voice="jf_alpha", language="ja"))
        took = time.perf_counter() - started
    finally:
        release.set()
    assert out.degradation is not None
    assert out.degradation.reason == "g2p_timeout"
    # The fallback voice needs the same stalled parser, so espeak-ng's formant voice (its own
    # phonemizer) says the sentence instead of the "please wait" clip.
    assert out.degradation.step == "formant" and out.voice_used == "espeak"
    assert took < 1.5, f"a stalled parser must not block the segment ({took:.2f} s)"
    assert len(out.samples) > 0.3 * out.sample_rate and np.abs(out.samples).max() > 0.05


def test_failing_voice_falls_back_then_breaker_skips_it_then_heals(registry, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    renderer = SegmentRenderer(Synthesizer(registry), breaker=CircuitBreaker(3, 5.0, clock=clock))
    kokoro = registry.engine(registry.spec("jf_nezumi"))
    real = kokoro.synthesize_phonemes
    calls: list[str] = []
    broken = {"on": True}

    def flaky(phonemes, voice, speed=1.0):  # type: ignore[no-untyped-def]
        calls.append(voice.voice_id)
        if broken["on"] and voice.voice_id == "jf_nezumi":
            raise RuntimeError("injected: this voice's inference fails")
        return real(phonemes, voice, speed)

    monkeypatch.setattr(kokoro, "synthesize_phonemes", flaky)
    seg = lambda: _segment("Hello there.", "en", voice="jf_nezumi", language="en")  # noqa: E731
    outs = [renderer.render(seg()) for _ in range(3)]
    assert [o.degradation.step for o in outs] == ["fallback_voice"] * 3  # type: ignore[union-attr]
    assert {o.degradation.reason for o in outs} == {"inference_error"}  # type: ignore[union-attr]
    assert {o.voice_used for o in outs} == {"en_joe"}, "the base voice of English"
    calls.clear()
    skipped = renderer.render(seg())
    assert skipped.degradation is not None and skipped.degradation.step == "breaker_open"
    assert "jf_nezumi" not in calls, "an open breaker does not even try the failing voice"
    broken["on"] = False  # healed
    clock.now += 5.1  # half-open: the next request probes the voice
    healed = renderer.render(seg())
    assert healed.degradation is None and healed.voice_used == "jf_nezumi"
    assert renderer.breaker.state(("jf_nezumi", "en")) == "closed"


def test_cantonese_and_unknown_scripts_are_reported_not_silent(speech_renderer) -> None:  # type: ignore[no-untyped-def]
    yue = speech_renderer.render(_segment("我哋今日去邊度食飯", "yue", language="yue"))
    assert yue.degradation is not None and yue.degradation.reason == "cantonese_as_mandarin"
    assert np.sqrt(np.mean(yue.samples**2)) > 0.01


def test_a_segment_is_phonemized_once_and_its_voice_resolved_once(registry, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    renderer = SegmentRenderer(Synthesizer(registry))
    engine = registry.engine(registry.spec("jm_kumo"))
    phonemized: list[str] = []
    resolved: list[tuple[str | None, str]] = []
    real_phonemize, real_voice_for = engine.phonemize, registry.voice_for

    def count_phonemize(text, lang):  # type: ignore[no-untyped-def]
        phonemized.append(text)
        return real_phonemize(text, lang)

    def count_voice_for(voice_id, lang):  # type: ignore[no-untyped-def]
        resolved.append((voice_id, lang))
        return real_voice_for(voice_id, lang)

    monkeypatch.setattr(engine, "phonemize", count_phonemize)
    monkeypatch.setattr(registry, "voice_for", count_voice_for)
    out = renderer.render(_segment("你好，世界。", "zh", voice="jm_kumo", language="zh"))
    assert out.degradation is None and out.samples.size > 0
    assert phonemized == ["你好，世界。"], "the G2P budget's phonemes are the ones synthesized"
    assert resolved == [("jm_kumo", frozenset({"zh"}))]


def test_asking_whether_the_breaker_is_closed_claims_no_probe() -> None:
    """The cached-first-span lookup asks `is_closed`; it must not take the half-open probe
    the regular path needs (a taken probe that never reports would keep the breaker open)."""
    clock = FakeClock()
    b = CircuitBreaker(threshold=1, open_s=5.0, clock=clock)
    key = ("v", "en")
    assert b.is_closed(key)
    b.record_degradation(key)
    clock.now += 5.1
    assert not b.is_closed(key) and not b.is_closed(key)
    assert b.allow(key), "the probe is still there for the regular path"


def test_a_half_open_probe_stopped_without_a_verdict_lets_the_next_one_probe() -> None:
    """A probe span preempted for a first span (it runs again later) must not keep the probe
    claimed: the class would stay on the fallback path on this worker until a restart."""
    now = [0.0]
    breaker = CircuitBreaker(threshold=1, open_s=5.0, clock=lambda: now[0])
    key = ("kokoro", "zh")
    breaker.record_degradation(key)
    now[0] = 6.0  # half-open
    assert breaker.allow(key)  # the probe
    assert not breaker.allow(key)  # one probe at a time
    breaker.release(key)  # stopped: no success, no failure
    assert breaker.allow(key)  # the next caller probes


def test_neural_engine_down_falls_back_to_formant_then_breaker_keeps_it_there(registry, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Kokoro down for every voice: a Spanish caller hears espeak-ng's Spanish, not a failure
    or the "please wait" clip, before and after the breaker opens."""
    from streamtts.processors.synthesize.speech_stack import WARM_G2P_LANGS

    registry.g2p.warm_up(WARM_G2P_LANGS)  # as a worker starts (a cold G2P is another degradation)
    clock = FakeClock()
    renderer = SegmentRenderer(Synthesizer(registry), breaker=CircuitBreaker(2, 30.0, clock=clock))
    kokoro = registry.engine(registry.spec("jm_kumo"))
    tried: list[str] = []

    def down(phonemes, voice, speed=1.0):  # type: ignore[no-untyped-def]
        tried.append(voice.voice_id)
        raise RuntimeError("injected: the neural engine is down")

    monkeypatch.setattr(kokoro, "synthesize_phonemes", down)
    text = "Su pedido número 3870 fue enviado ayer."
    outs = [renderer.render(_segment(text, "es", language="es")) for _ in range(3)]
    assert tried, "the neural voice was tried first"
    assert [o.degradation.step for o in outs] == ["formant"] * 3  # type: ignore[union-attr]
    assert [o.degradation.reason for o in outs] == ["inference_error", "inference_error", "breaker_open"]  # type: ignore[union-attr]
    assert renderer.breaker.state(("auto", "es")) == "open"
    for out in outs:
        assert out.voice_used == "espeak"
        seconds = len(out.samples) / out.sample_rate
        assert 1.5 < seconds < 8.0, f"the whole sentence, digits read out ({seconds:.2f} s)"
        assert float(np.sqrt(np.mean(out.samples**2))) > 0.02
