"""What request text may contain, checked before any work (pure).

Markup is refused by default rather than silently stripped: `<speak>` or `<audio src=…>`
means the caller expects SSML features we do not implement, or is probing for injection.
Control characters (other than tab/newline) and bidi overrides hide content from reviewers
and logs, so they are refused too, also where SSML spells them as character references
(`&#x202E;`: `ssml` checks the text it decodes with `check_characters`). Operators may
choose "strip" for markup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from streamtts.processors.segment.exceptions import InputRejected

_TAG = re.compile(r"</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def is_control(ch: str) -> bool:
    """A character the policy refuses wherever it comes from (typed, or decoded from an SSML
    character reference)."""
    return _CONTROL.fullmatch(ch) is not None


def control_rejection(ch: str, position: int, *, how: str = "") -> InputRejected:
    """The one refusal for a control or bidi character, `how` saying how it arrived."""
    return InputRejected(
        "control_characters", f"text contains control character U+{ord(ch):04X}{how} at position {position}"
    )


def check_characters(text: str, *, positions: Sequence[int] | int | None = None, how: str = "") -> None:
    """Raise InputRejected (control_characters) for the first control or bidi character in
    `text`. `positions` maps its characters back to the request text: one per character, one
    for all of them, or None (they are the request text)."""
    bad = _CONTROL.search(text)
    if bad:
        if positions is None:
            at = bad.start()
        elif isinstance(positions, int):
            at = positions
        else:
            at = positions[bad.start()]
        raise control_rejection(bad.group(), at, how=how)


def check_text(text: str, *, markup: str = "reject") -> None:
    """Raise InputRejected (reason: markup_not_allowed / control_characters) or return."""
    check_characters(text)
    if markup == "reject":
        tag = _TAG.search(text)
        if tag:
            raise InputRejected(
                "markup_not_allowed",
                f"text contains markup {tag.group()[:40]!r} at position {tag.start()}; "
                "SSML is not supported (send plain text)",
            )
