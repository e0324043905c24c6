"""What request text may contain, checked before any work (pure).

Markup is refused by default rather than silently stripped: `<speak>` or `<audio src=…>`
means the caller expects SSML features we do not implement, or is probing for injection.
Control characters (other than tab/newline) and bidi overrides hide content from reviewers
and logs, so they are refused too. Operators may choose "strip" for markup.
"""

from __future__ import annotations

import re

from streamtts.processors.segment.exceptions import InputRejected

_TAG = re.compile(r"</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def check_text(text: str, *, markup: str = "reject") -> None:
    """Raise InputRejected (reason: markup_not_allowed / control_characters) or return."""
    bad = _CONTROL.search(text)
    if bad:
        raise InputRejected(
            "control_characters",
            f"text contains control character U+{ord(bad.group()):04X} at position {bad.start()}",
        )
    if markup == "reject":
        tag = _TAG.search(text)
        if tag:
            raise InputRejected(
                "markup_not_allowed",
                f"text contains markup {tag.group()[:40]!r} at position {tag.start()}; "
                "SSML is not supported (send plain text)",
            )
