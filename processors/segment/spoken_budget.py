"""How much a request may say once everything in it is read out (pure).

`max_text_chars` bounds what a request *holds*; what it *says* can be far more: a lexicon
alias of 500 characters for a one-letter grapheme, numbers read out ("777,777" is 64
characters of words), SSML say-as and sub. Each is bounded on its own, their product is
not ("q "*1000 with such an alias said 498,485 characters). So the spoken text is counted as
it is produced and the request is refused (reason `expanded_too_long`) the moment it passes
`spoken_limit`: a fixed multiple of what was written, never more than twice the longest
text accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtts.processors.segment.exceptions import ExpandedTooLong

MAX_EXPANSION = 10
"""Characters said per character written: numbers read out stay below it ("777,777" says
64 for 7; "77°F" 32 for 4)."""
EXPANSION_ALLOWANCE = 1_000
"""Said on top of that: a short request may use a long alias or two."""
SPOKEN_PER_TEXT_LIMIT = 2
"""However it was written, a request says at most this many times `max_text_chars`."""


def spoken_limit(text_chars: int, max_text_chars: int) -> int:
    """The most characters a request of `text_chars` characters may say."""
    return min(SPOKEN_PER_TEXT_LIMIT * max_text_chars, MAX_EXPANSION * text_chars + EXPANSION_ALLOWANCE)


@dataclass
class SpokenBudget:
    """The characters one request may still say; spent as spans are made (one budget for
    a whole SSML document, whose blocks are segmented one by one)."""

    limit: int
    text_chars: int
    """What the request holds (for the message)."""
    used: int = 0

    @classmethod
    def for_text(cls, text_chars: int, max_text_chars: int) -> SpokenBudget:
        return cls(spoken_limit(text_chars, max_text_chars), text_chars)

    @property
    def left(self) -> int:
        return self.limit - self.used

    def spend(self, chars: int) -> None:
        """Count `chars` more characters said. Raises ExpandedTooLong past the limit."""
        self.used += chars
        if self.used > self.limit:
            raise self.exceeded()

    def exceeded(self) -> ExpandedTooLong:
        return ExpandedTooLong(
            f"read out (lexicon entries, numbers, markup), the text says more than {self.limit} "
            f"characters: the most a request of {self.text_chars} characters may say"
        )
