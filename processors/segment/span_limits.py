"""The size limits of span planning, in one value: what `planner.plan_segments`,
`segmenter.segment_text` and the direct path take, built from the segment stage's settings in
one call (`SpanLimits.of`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamtts.processors.segment.exceptions import TextTooLong

if TYPE_CHECKING:
    from streamtts.runtime.pipeline_settings import TextSettings

DEFAULT_FIRST_MAX_CHARS = 40
# A first span shorter than this joins the next clause: "您好，" alone is spoken as a fragment
# (ASR heard "您也好"); "您好，请问有什么可以帮您？" keeps the greeting's prosody. Measured in
# `streamtts eval --first-min`.
DEFAULT_FIRST_MIN_CHARS = 12
DEFAULT_MAX_CHARS = 150
DEFAULT_MAX_TEXT_CHARS = 20_000


@dataclass(frozen=True)
class SpanLimits:
    """How long spans and the text they come from may be.

    Not checked here: the splitter checks the span sizes it is given
    (`splitter.ClauseSplitter`), the settings check theirs at start-up (`TextSettings`), and
    `segment_text` caps `first_min_chars` at `first_max_chars`.
    """

    first_max_chars: int = DEFAULT_FIRST_MAX_CHARS
    """Size limit of the first span (latency of the first audio chunk)."""
    first_min_chars: int = DEFAULT_FIRST_MIN_CHARS
    """The first span takes clauses until it has at least this cost (0: the first clause
    alone, however short)."""
    max_chars: int = DEFAULT_MAX_CHARS
    """Size limit of every other span (CJK characters count double)."""
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS
    """Longest accepted input, counted before normalization; it also bounds what the text may
    say (`spoken_budget`)."""

    @classmethod
    def of(cls, text: TextSettings) -> SpanLimits:
        """The limits the segment stage plans with."""
        return cls(
            first_max_chars=text.first_max_chars,
            first_min_chars=text.first_min_chars,
            max_chars=text.max_chars,
            max_text_chars=text.max_text_chars,
        )

    def check_length(self, text: str) -> None:
        """Raises TextTooLong when `text` (as written) is over `max_text_chars`."""
        if len(text) > self.max_text_chars:
            raise TextTooLong(f"text has {len(text)} characters; the limit is {self.max_text_chars}")


DEFAULT_LIMITS = SpanLimits()
