"""Sentences out of text that arrives in pieces (the WebSocket's `text` messages, an LLM's
tokens): complete sentences are cut off as soon as their end is certain, the unfinished rest
waits for more. Linear in the text however it is cut into pieces (tests/processors/segment/
test_complexity.py), and every language's own stops come from the language table."""

from __future__ import annotations

import re

from streamtts.schemas.languages import CLOSED_STOPS, SPACED_STOPS

# A sentence ends at a spaced stop (. ! ? …) followed by whitespace (so "3.5" and a
# half-written "Mr." at the end of a fragment wait for more text), or at a stop that needs no
# space: the CJK full stops and every language's own (। ؟ ։ ።, from the language table), and
# the CJK semicolon (a streamed reply is spoken sooner). Linear: a boundary is tried only where
# a run of stops begins (any later start in the run ends the same way) and nothing
# backtracks, so "."*5000 is one pass, not one per position.
_STOPS = SPACED_STOPS
_CLOSERS = "\"'”’)]"
_SPACED = re.escape(SPACED_STOPS)
_CLOSED = re.escape(CLOSED_STOPS + "；")
_BOUNDARY = re.compile(rf"(?<![{_SPACED}])[{_SPACED}]++[\"'”’)\]]*+\s+|[{_CLOSED}]++[”’」』）]*+")
# A new boundary ends in new text with one of these (see `split_new_sentences`).
_BOUNDARY_END = re.compile(rf"[\s{_CLOSED}]")


def split_sentences(buffer: str, scan_from: int = 0) -> tuple[list[str], str]:
    """Complete sentences at the start of `buffer`, and the unfinished rest.

    `scan_from`: no boundary begins before it (what an earlier call already scanned)."""
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(buffer, scan_from):
        sentence = buffer[start : m.end()].strip()
        if sentence:
            out.append(sentence)
        start = m.end()
    return out, buffer[start:]


def split_new_sentences(buffer: str, new_from: int, pending: int) -> tuple[list[str], str, int]:
    """`split_sentences` of a buffer whose text before `new_from` was split already,
    looking only at the new text and the unfinished end of sentence before it.

    Args:
        buffer: the unfinished rest of the last call, then the new text.
        new_from: where the new text begins.
        pending: where the last call's unfinished end of sentence (stops and closers waiting
            for their space) begins, or `new_from` when there is none.
    Returns:
        The completed sentences, the unfinished rest, and where its pending end of sentence
        begins (the next call's `pending`).
    """
    sentences: list[str] = []
    rest, start = buffer, new_from
    if _BOUNDARY_END.search(buffer, new_from):  # otherwise nothing new can end a sentence
        sentences, rest = split_sentences(buffer, pending)
        if sentences:  # what is left lies in the new text
            start, pending = 0, 0
    return sentences, rest, _pending_stop(rest, start, pending)


def _pending_stop(text: str, new_from: int, pending: int) -> int:
    """Where the trailing stops-then-closers of `text` begin (len(text): none), reading only
    text[new_from:]; `pending` is that place in text[:new_from]."""
    end = i = len(text)
    while i > new_from and text[i - 1] in _CLOSERS:
        i -= 1
    j = i
    while j > new_from and text[j - 1] in _STOPS:
        j -= 1
    if j > new_from:  # the run starts in the new text (or there is none)
        return j if j < i else end
    if j < i:  # the new text opens with stops: they continue a run of stops before them
        return pending if new_from and text[new_from - 1] in _STOPS else new_from
    return pending if pending < new_from else end  # only closers (or nothing) were added
