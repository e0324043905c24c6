"""Text that remembers where each character came from in the request text.

Word timestamps point at character ranges of the *original* request text, while synthesis
speaks a rewritten one (Unicode folded, markup removed, numbers read out, codes spelled).
A `MappedText` carries, for every character, the [start, end) range of the original text it
stands for, through each rewrite: a copied character keeps its own range; the characters a
rewrite produced ("一百" for "100", "one thousand" for "1,000") all point at the whole range
they replaced, so a word inside them maps to the number it reads out.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from streamtts.schemas.segment import TextBlock


@dataclass(frozen=True)
class MappedText:
    text: str
    starts: tuple[int, ...]
    """Per character: first original character it stands for."""
    ends: tuple[int, ...]
    """Per character: one past the last original character it stands for."""

    @classmethod
    def of(cls, text: str, offset: int = 0) -> MappedText:
        """Text copied from the original at `offset` (each character maps to itself)."""
        n = len(text)
        return cls(text, tuple(range(offset, offset + n)), tuple(range(offset + 1, offset + n + 1)))

    @classmethod
    def join(cls, parts: Iterable[MappedText]) -> MappedText:
        items = list(parts)
        return cls(
            "".join(p.text for p in items),
            tuple(s for p in items for s in p.starts),
            tuple(e for p in items for e in p.ends),
        )

    def __len__(self) -> int:
        return len(self.text)

    def __add__(self, other: MappedText) -> MappedText:
        return MappedText(self.text + other.text, self.starts + other.starts, self.ends + other.ends)

    def slice(self, start: int, end: int) -> MappedText:
        return MappedText(self.text[start:end], self.starts[start:end], self.ends[start:end])

    def strip(self) -> MappedText:
        stripped = self.text.strip()
        if not stripped:
            return self.slice(0, 0)
        start = len(self.text) - len(self.text.lstrip())
        return self.slice(start, start + len(stripped))

    def find(self, text: str, start: int = 0) -> MappedText | None:
        """The first occurrence of `text` at or after `start`, with its map (None: absent)."""
        at = self.text.find(text, start)
        return None if at < 0 else self.slice(at, at + len(text))

    def without(self, chars: str) -> MappedText:
        """The text with every character of `chars` removed."""
        keep = [i for i, c in enumerate(self.text) if c not in chars]
        return MappedText(
            "".join(self.text[i] for i in keep),
            tuple(self.starts[i] for i in keep),
            tuple(self.ends[i] for i in keep),
        )

    def source_range(self, start: int, end: int) -> tuple[int, int]:
        """Original [start, end) covered by characters [start, end) of this text."""
        if start >= end or start >= len(self.text):
            at = (
                self.ends[start - 1]
                if 0 < start <= len(self.ends)
                else (self.starts[0] if self.starts else 0)
            )
            return at, at
        return min(self.starts[start:end]), max(self.ends[start:end])

    def sub(self, pattern: re.Pattern[str], repl: str | Callable[[re.Match[str]], str]) -> MappedText:
        """`pattern.sub(repl, text)`, mapped: a replacement stands for the whole match."""
        out: list[MappedText] = []
        pos = 0
        for m in pattern.finditer(self.text):
            out.append(self.slice(pos, m.start()))
            new = repl if isinstance(repl, str) else repl(m)
            a, b = self.source_range(m.start(), m.end())
            out.append(MappedText(new, (a,) * len(new), (b,) * len(new)))
            pos = m.end()
        out.append(self.slice(pos, len(self.text)))
        return MappedText.join(out)

    def map_chars(self, fn: Callable[[str], str]) -> MappedText:
        """Each character replaced by `fn(char)` (any length: "" drops it)."""
        text: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        for c, s, e in zip(self.text, self.starts, self.ends, strict=True):
            new = fn(c)
            text.append(new)
            starts.extend([s] * len(new))
            ends.extend([e] * len(new))
        return MappedText("".join(text), tuple(starts), tuple(ends))

    def rewritten(self, new_text: str) -> MappedText:
        """`new_text`, a rewrite of this text by any function (numbers read out, symbols
        dropped), mapped by aligning the two: equal stretches keep their characters' ranges,
        each replaced stretch stands for what it replaced. For short texts (a sentence)."""
        if new_text == self.text:
            return self
        starts: list[int] = []
        ends: list[int] = []
        matcher = difflib.SequenceMatcher(None, self.text, new_text, autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                starts.extend(self.starts[i1:i2])
                ends.extend(self.ends[i1:i2])
            elif j2 > j1:  # replace or insert: the new characters stand for the old stretch
                a, b = self.source_range(i1, i2) if i2 > i1 else self.source_range(i1, i1)
                starts.extend([a] * (j2 - j1))
                ends.extend([b] * (j2 - j1))
        return MappedText(new_text, tuple(starts), tuple(ends))

    def blocks(self) -> list[TextBlock]:
        """The map, compressed: linear runs and replaced stretches (see `TextBlock`). A stretch
        of n characters replacing n characters reads back as linear: close enough, since
        such a stretch is one word's worth of text."""
        out: list[list[int]] = []  # [span_start, span_end, source_start, source_end]
        kinds: list[str] = []  # "one" (a single character so far), "linear" or "group"
        for i, (s, e) in enumerate(zip(self.starts, self.ends, strict=True)):
            if out:
                b, kind = out[-1], kinds[-1]
                linear_ok = kind != "group" and b[3] - b[2] == b[1] - b[0]
                if linear_ok and e - s == 1 and s == b[3]:
                    b[1], b[3], kinds[-1] = i + 1, e, "linear"
                    continue
                if kind != "linear" and (s, e) == (b[2], b[3]):
                    b[1], kinds[-1] = i + 1, "group"
                    continue
            out.append([i, i + 1, s, e])
            kinds.append("one")
        return [(b[0], b[1], b[2], b[3]) for b in out]
