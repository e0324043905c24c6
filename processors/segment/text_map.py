"""Text that remembers where each character came from in the request text.

Word timestamps point at character ranges of the *original* request text, while synthesis
speaks a rewritten one (Unicode folded, markup removed, numbers read out, codes spelled).
A `MappedText` carries, for every character, the [start, end) range of the original text it
stands for, through each rewrite: a copied character keeps its own range; the characters a
rewrite produced ("一百" for "100", "one thousand" for "1,000") all point at the whole range
they replaced, so a word inside them maps to the number it reads out.

Untracked (`tracked=False`, requests without timestamps) the same operations only transform
the text: no maps are built and nothing is aligned, so a plain request pays nothing.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from streamtts.schemas.segment import TextBlock

# Above this many characters (old + new), an arbitrary rewrite is aligned by divide and
# conquer on shared anchors instead of one difflib pass: difflib is quadratic on long,
# repetitive text ("we had 2 coffees, " × 500 took minutes), anchors are found by str.find.
_DIFF_LIMIT = 400
_ANCHOR = 12


@dataclass(frozen=True)
class MappedText:
    text: str
    starts: tuple[int, ...]
    """Per character: first original character it stands for (empty when untracked)."""
    ends: tuple[int, ...]
    """Per character: one past the last original character it stands for."""
    tracked: bool = True

    @classmethod
    def of(cls, text: str, offset: int = 0, *, tracked: bool = True) -> MappedText:
        """Text copied from the original at `offset` (each character maps to itself)."""
        if not tracked:
            return cls(text, (), (), False)
        n = len(text)
        return cls(text, tuple(range(offset, offset + n)), tuple(range(offset + 1, offset + n + 1)))

    def _plain(self, text: str) -> MappedText:
        return MappedText(text, (), (), False)

    @classmethod
    def join(cls, parts: Iterable[MappedText]) -> MappedText:
        items = list(parts)
        text = "".join(p.text for p in items)
        if not all(p.tracked for p in items):
            return cls(text, (), (), False)
        return cls(text, tuple(s for p in items for s in p.starts), tuple(e for p in items for e in p.ends))

    def __len__(self) -> int:
        return len(self.text)

    def __add__(self, other: MappedText) -> MappedText:
        return MappedText.join([self, other])

    def slice(self, start: int, end: int) -> MappedText:
        if not self.tracked:
            return self._plain(self.text[start:end])
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
        text = "".join(self.text[i] for i in keep)
        if not self.tracked:
            return self._plain(text)
        return MappedText(text, tuple(self.starts[i] for i in keep), tuple(self.ends[i] for i in keep))

    def through(self, outer: MappedText) -> MappedText:
        """This map (into `outer`'s text) carried on into what `outer` maps into: text
        segmented from a block of an SSML document points into the document."""
        if not self.tracked or not outer.tracked:
            return self._plain(self.text)
        pairs = [outer.source_range(s, e) for s, e in zip(self.starts, self.ends, strict=True)]
        return MappedText(self.text, tuple(a for a, _ in pairs), tuple(b for _, b in pairs))

    def source_range(self, start: int, end: int) -> tuple[int, int]:
        """Original [start, end) covered by characters [start, end) of this text."""
        if not self.tracked or not self.starts:
            return (0, 0)
        if start >= end or start >= len(self.text):
            at = self.ends[start - 1] if 0 < start <= len(self.ends) else self.starts[0]
            return at, at
        return min(self.starts[start:end]), max(self.ends[start:end])

    def sub(self, pattern: re.Pattern[str], repl: str | Callable[[re.Match[str]], str]) -> MappedText:
        """`pattern.sub(repl, text)`, mapped: a replacement stands for the whole match."""
        if not self.tracked:
            return self._plain(pattern.sub(repl, self.text))
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
        if not self.tracked:
            return self._plain("".join(fn(c) for c in self.text))
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
        each replaced stretch stands for what it replaced. Bounded cost at any length."""
        if not self.tracked:
            return self._plain(new_text)
        if new_text == self.text:
            return self
        starts: list[int] = []
        ends: list[int] = []
        self._align(0, len(self.text), new_text, 0, len(new_text), starts, ends)
        return MappedText(new_text, tuple(starts), tuple(ends))

    def _align(
        self, i1: int, i2: int, new: str, j1: int, j2: int, starts: list[int], ends: list[int]
    ) -> None:
        """Map new[j1:j2] as a rewrite of self.text[i1:i2] (appending to starts/ends)."""
        old = self.text
        # Common prefix and suffix: copied characters (linear).
        p = 0
        while i1 + p < i2 and j1 + p < j2 and old[i1 + p] == new[j1 + p]:
            p += 1
        starts.extend(self.starts[i1 : i1 + p])
        ends.extend(self.ends[i1 : i1 + p])
        i1, j1 = i1 + p, j1 + p
        q = 0
        while i2 - q > i1 and j2 - q > j1 and old[i2 - q - 1] == new[j2 - q - 1]:
            q += 1
        tail = (self.starts[i2 - q : i2], self.ends[i2 - q : i2])
        i2, j2 = i2 - q, j2 - q
        if j2 > j1:
            if (
                i2 == i1
                or (i2 - i1) + (j2 - j1) <= _DIFF_LIMIT
                or not self._split(i1, i2, new, j1, j2, starts, ends)
            ):
                self._diff(i1, i2, new, j1, j2, starts, ends)
        starts.extend(tail[0])
        ends.extend(tail[1])

    def _split(
        self, i1: int, i2: int, new: str, j1: int, j2: int, starts: list[int], ends: list[int]
    ) -> bool:
        """Divide at an anchor: a stretch from the middle of the old text found near the
        same relative place in the new one. False when none is found (then one group)."""
        old = self.text
        mid = (i1 + i2) // 2
        for shift in (0, -_ANCHOR * 4, _ANCHOR * 4, -_ANCHOR * 16, _ANCHOR * 16):
            a = mid + shift
            if a < i1 or a + _ANCHOR > i2:
                continue
            anchor = old[a : a + _ANCHOR]
            expect = j1 + (a - i1) * (j2 - j1) // max(1, i2 - i1)
            window = max(_ANCHOR * 8, (j2 - j1) // 4)
            lo, hi = max(j1, expect - window), min(j2, expect + window + _ANCHOR)
            b = new.find(anchor, lo, hi)
            if b >= 0:
                self._align(i1, a, new, j1, b, starts, ends)
                self._align(a, i2, new, b, j2, starts, ends)
                return True
        return False

    def _diff(self, i1: int, i2: int, new: str, j1: int, j2: int, starts: list[int], ends: list[int]) -> None:
        old = self.text
        if (i2 - i1) + (j2 - j1) > _DIFF_LIMIT * 4:  # no anchor in a long stretch: one group
            a, b = self.source_range(i1, i2) if i2 > i1 else self.source_range(i1, i1)
            starts.extend([a] * (j2 - j1))
            ends.extend([b] * (j2 - j1))
            return
        matcher = difflib.SequenceMatcher(None, old[i1:i2], new[j1:j2], autojunk=False)
        for op, a1, a2, b1, b2 in matcher.get_opcodes():
            if op == "equal":
                starts.extend(self.starts[i1 + a1 : i1 + a2])
                ends.extend(self.ends[i1 + a1 : i1 + a2])
            elif b2 > b1:  # replace or insert: the new characters stand for the old stretch
                a, b = self.source_range(i1 + a1, i1 + a2) if a2 > a1 else self.source_range(i1 + a1, i1 + a1)
                starts.extend([a] * (b2 - b1))
                ends.extend([b] * (b2 - b1))

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
