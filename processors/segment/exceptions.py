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


class InputRejected(SegmentationError):
    """Request text refused by the input policy (before segmentation); `reason` names the rule."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)
