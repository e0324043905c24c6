"""Word timestamps → caption files (WebVTT, SRT) and back to JSON (pure).

Cues group consecutive words: a cue ends at a pause (a sentence or clause break), when it
would exceed `max_chars` of display text, or `max_ms` of speech, so captions read like
subtitles rather than one word at a time. Each cue's text is its words as the request wrote
them, joined with a space where the request had one between Latin-script words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from streamtts.schemas.chunks import WordTiming

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


def _wide(ch: str) -> bool:
    cp = ord(ch)
    return (
        0x2E80 <= cp <= 0x9FFF or 0xAC00 <= cp <= 0xD7AF or 0xF900 <= cp <= 0xFAFF or 0xFF00 <= cp <= 0xFFEF
    )


def _joined(words: Sequence[WordTiming]) -> str:
    out = ""
    for i, w in enumerate(words):
        if i and not (_wide(out[-1]) or _wide(w.text[:1] or " ")) and w.char_start > words[i - 1].char_end:
            out += " "
        out += w.text
    return out


def cues(
    words: Sequence[WordTiming], *, max_chars: int = 42, max_ms: float = 6000.0, pause_ms: float = 350.0
) -> list[Cue]:
    """Words grouped into caption cues (see the module docstring)."""
    out: list[Cue] = []
    group: list[WordTiming] = []
    for w in words:
        if group:
            gap = w.start_ms - group[-1].end_ms
            too_long = len(_joined([*group, w])) > max_chars or w.end_ms - group[0].start_ms > max_ms
            if gap >= pause_ms or too_long:
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


def _cue_text(text: str) -> str:
    # "-->" would end a cue's timing line early; "<" and "&" start markup in WebVTT.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


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
            cue.text.replace("\n", " "),
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
            out.append(
                w.model_copy(
                    update={
                        "start_ms": round(max(0.0, w.start_ms + shift), 1),
                        "end_ms": round(max(0.0, w.end_ms + shift), 1),
                    }
                )
            )
        position += duration_ms
    return out
