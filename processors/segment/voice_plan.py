"""One speaker per request where possible: the voice each span is spoken with.

A change of voice inside a sentence is what listeners (and ASR) notice most: a Piper word in a
Kokoro sentence is another speaker, model and sample rate. So "auto" picks one voice for the
whole request when one voice speaks all of its languages, else one per sentence, and only when
no voice speaks a whole sentence one per span. A named voice that cannot speak a sentence is
replaced for that whole sentence, not word by word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from streamtts.processors.segment.segmenter import Span

VoiceScope = Literal["request", "sentence", "span"]
# Spans no engine speaks degrade on their own; they do not constrain the choice.
_UNSPOKEN = frozenset({"other"})


class VoiceChooser(Protocol):
    """What planning needs of the voice registry."""

    def languages_of(self, voice_id: str) -> frozenset[str]:
        """Languages the voice speaks (raises a `RecordError` for an unknown voice)."""
        ...

    def voice_for_langs(self, langs: frozenset[str]) -> str | None:
        """The one voice "auto" picks for all of `langs`, or None if no voice speaks them all."""
        ...


@dataclass(frozen=True)
class VoicePlan:
    """The voice of one span."""

    voice: str | None
    """Voice id; None: the request's own voice speaks it."""
    scope: VoiceScope | None
    """How widely this choice holds (None with `voice` None)."""


def plan_voices(
    spans: Sequence[Span], requested: str | None, chooser: VoiceChooser
) -> list[tuple[Span, VoicePlan]]:
    """Voices for `spans` of one request.

    Args:
        spans: the request's spans in order.
        requested: the request's voice; None for "auto".
        chooser: the voice registry.
    Returns:
        (span, plan) pairs in speaking order. A mixed span that no single voice speaks is
        split into one span per language run (each with the voice of its language, scope
        "span"); every other span is returned as it is. Span indices are renumbered.
    """
    if requested is None:
        whole = frozenset().union(*(s.langs for s in spans)) - _UNSPOKEN
        voice = chooser.voice_for_langs(whole) if whole else None
        if voice is not None:
            return [(span, VoicePlan(voice, "request")) for span in spans]
        speaks: frozenset[str] = frozenset()
    else:
        speaks = chooser.languages_of(requested)
    by_sentence: dict[int, frozenset[str]] = {}
    for span in spans:
        by_sentence[span.sentence_index] = by_sentence.get(span.sentence_index, frozenset()) | (
            span.langs - _UNSPOKEN
        )
    planned: list[tuple[Span, VoicePlan]] = []
    for span in spans:
        langs = by_sentence[span.sentence_index]
        if requested is not None and langs <= speaks:
            planned.append((span, VoicePlan(None, None)))
            continue
        voice = chooser.voice_for_langs(langs) if langs else None
        if voice is not None:
            planned.append((span, VoicePlan(voice, "sentence")))
            continue
        for piece in _split_if_unspeakable(span, chooser):
            own = piece.langs - _UNSPOKEN
            if requested is not None and own <= speaks:
                planned.append((piece, VoicePlan(None, "span")))
                continue
            voice = chooser.voice_for_langs(own) if own else None
            planned.append((piece, VoicePlan(voice, "span") if voice else VoicePlan(None, None)))
    return [(replace(span, index=i), plan) for i, (span, plan) in enumerate(planned)]


def _split_if_unspeakable(span: Span, chooser: VoiceChooser) -> list[Span]:
    """A mixed span as one span per run when no single voice speaks all of its runs."""
    if len(span.runs) < 2 or chooser.voice_for_langs(span.langs - _UNSPOKEN) is not None:
        return [span]
    last = len(span.runs) - 1
    out: list[Span] = []
    at = 0
    for k, run in enumerate(span.runs):
        start, at = at, at + len(run.text)
        if not run.text.strip():
            continue
        lead = len(run.text) - len(run.text.lstrip())
        text = run.text.strip()
        source = span.source.slice(start + lead, start + lead + len(text)) if span.source else None
        out.append(
            replace(
                span,
                text=text,
                lang=run.lang,
                runs=(replace(run, text=text),),
                ends_sentence=span.ends_sentence and k == last,
                pause_after_ms=span.pause_after_ms if k == last else 0,
                source=source,
            )
        )
    return out
