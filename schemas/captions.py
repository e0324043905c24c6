"""Word timestamps → caption files (WebVTT, SRT) and back to JSON (pure).

Cues group consecutive words: a cue ends after a sentence, at a pause, or when it would
exceed `max_chars` of display text or `max_ms` of speech, so captions read like subtitles
rather than one word at a time. A cue's text is the request's own text for its words (each
word with what followed it: spaces, punctuation).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from streamtts.schemas.chunks import WordTiming
from streamtts.schemas.languages import SENTENCE_STOPS

CAPTION_FORMATS = ("vtt", "srt", "json")
CAPTION_CONTENT_TYPES = {
    "vtt": "text/vtt; charset=utf-8",
    "srt": "application/x-subrip; charset=utf-8",
    "json": "application/json",
}


@dataclass(frozen=True)
class Cue:
    start_ms: float
    end_ms: float
    text: str


def _separator(word: WordTiming, following: WordTiming) -> str:
    """What stands between two words: the request's own text, plus the space a span break
    dropped after Latin punctuation ("world," + "this" → "world, this")."""
    sep = word.trailing
    gap = following.char_start - word.char_end - len(sep)  # request text no trailing holds
    latin = following.text[:1].isascii() and word.text[-1:].isascii()
    if latin and not sep.endswith((" ", "\n")) and ((sep and sep[-1] in ",.;:!?") or gap > 0):
        sep += " "
    return sep


def _joined(words: Sequence[WordTiming]) -> str:
    """The words with what the request had between them (the last one's trailing dropped
    unless it is punctuation that ends the cue)."""
    text = "".join(w.text + _separator(w, nxt) for w, nxt in itertools.pairwise(words))
    last = words[-1]
    return (text + last.text + last.trailing.rstrip()).strip()


def cues(
    words: Sequence[WordTiming], *, max_chars: int = 42, max_ms: float = 6000.0, pause_ms: float = 250.0
) -> list[Cue]:
    """Words grouped into caption cues (see the module docstring)."""
    out: list[Cue] = []
    group: list[WordTiming] = []
    for w in words:
        if group:
            gap = w.start_ms - group[-1].end_ms
            ended = any(c in SENTENCE_STOPS for c in group[-1].trailing)
            too_long = len(_joined([*group, w])) > max_chars or w.end_ms - group[0].start_ms > max_ms
            if ended or gap >= pause_ms or too_long:
                out.append(Cue(group[0].start_ms, group[-1].end_ms, _joined(group)))
                group = []
        group.append(w)
    if group:
        out.append(Cue(group[0].start_ms, group[-1].end_ms, _joined(group)))
    return out


def _clock(ms: float, sep: str) -> str:
    total = max(0, round(ms))
    hours, rest = divmod(total, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{sep}{millis:03d}"


_LINE_BREAKS_RE = re.compile(r"[\r\n\v\f\x85\u2028\u2029]+")
"""What ends a line somewhere: CR (alone or in CRLF) and LF end one in SRT and WebVTT, the
others in players that read Unicode line breaks. A cue is written as one line."""


def _one_line(text: str) -> str:
    return _LINE_BREAKS_RE.sub(" ", text)


def _cue_text(text: str) -> str:
    # "-->" would end a cue's timing line early; "<" and "&" start markup in WebVTT.
    return _one_line(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def to_vtt(words: Sequence[WordTiming]) -> str:
    """A WebVTT file of the words' cues."""
    lines = ["WEBVTT", ""]
    for i, cue in enumerate(cues(words), 1):
        end = max(cue.end_ms, cue.start_ms + 1)
        lines += [str(i), f"{_clock(cue.start_ms, '.')} --> {_clock(end, '.')}", _cue_text(cue.text), ""]
    return "\n".join(lines)


def to_srt(words: Sequence[WordTiming]) -> str:
    """An SRT file of the words' cues."""
    lines: list[str] = []
    for i, cue in enumerate(cues(words), 1):
        end = max(cue.end_ms, cue.start_ms + 1)
        lines += [
            str(i),
            f"{_clock(cue.start_ms, ',')} --> {_clock(end, ',')}",
            _one_line(cue.text),
            "",
        ]
    return "\n".join(lines)


def to_json(words: Sequence[WordTiming]) -> bytes:
    """The word list as a JSON array (the `captions.words` object)."""
    return orjson.dumps([w.model_dump() for w in words])


def render(words: Sequence[WordTiming], fmt: str) -> bytes:
    """`fmt` (vtt, srt, json) bytes of the words."""
    if fmt == "vtt":
        return to_vtt(words).encode()
    if fmt == "srt":
        return to_srt(words).encode()
    if fmt == "json":
        return to_json(words)
    raise ValueError(f"caption format must be one of {', '.join(CAPTION_FORMATS)}, not {fmt!r}")


def retimed(chunks: Sequence[tuple[float, float | None, Sequence[WordTiming]]]) -> list[WordTiming]:
    """The words of a request's chunks, timed from the audio actually assembled.

    chunks: (duration_ms, offset_ms, words) per chunk in playing order. A word's time inside
    its chunk (start - offset) is kept; the chunk's place is the sum of the durations before
    it, so captions are right even where a chunk's own offset was not (see `timeline`).
    """
    out: list[WordTiming] = []
    position = 0.0
    for duration_ms, offset_ms, words in chunks:
        shift = position - (offset_ms or 0.0)
        for w in words:
            start, end = round(max(0.0, w.start_ms + shift), 1), round(max(0.0, w.end_ms + shift), 1)
            if out and (out[-1].char_start, out[-1].char_end) == (w.char_start, w.char_end):
                # One word of the request spoken across a span break (a number read out):
                # one word, from the start of its first part to the end of its last.
                out[-1] = out[-1].model_copy(
                    update={"end_ms": max(out[-1].end_ms, end), "trailing": w.trailing}
                )
                continue
            out.append(w.model_copy(update={"start_ms": start, "end_ms": end}))
        position += duration_ms
    return out
