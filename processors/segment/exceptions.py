"""Errors raised by the text front-end (all permanent: the same text fails again)."""

from __future__ import annotations

from streamtts.errors import RecordError


class SegmentationError(RecordError, ValueError):
    """The text cannot be segmented into speakable spans. `str(err)` is a one-line message
    for the requester."""

    reason = "nothing_speakable"


class TextTooLong(SegmentationError):
    reason = "text_too_long"


class EmptyText(SegmentationError):
    reason = "empty_text"


class UnsupportedLanguageHint(SegmentationError):
    reason = "unsupported_language"


class UnsupportedLanguage(SegmentationError):
    """Every letter of the text is in a script no row of the language table speaks."""

    reason = "unsupported_language"


class InputRejected(SegmentationError):
    """Request text refused by the input policy (before segmentation); `reason` names the rule."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class ExpandedTooLong(SegmentationError):
    """More to say than the request may (its lexicon, numbers and markup read out)."""

    reason = "expanded_too_long"


class TooManySegments(SegmentationError):
    reason = "too_many_segments"


class UnreadableNumber(SegmentationError):
    """A number the reader of its language cannot say (the message names it)."""

    reason = "unreadable_number"


class TooCostly(SegmentationError):
    """Planning the request took longer than its budget (`plan_budget`); the message says
    how far it got."""

    reason = "too_costly"
