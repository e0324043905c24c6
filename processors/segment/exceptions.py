"""Errors raised by the text front-end (all permanent: the same text fails again)."""

from __future__ import annotations

from typing import Any

from streamtts.errors import RecordError


class SegmentationError(RecordError, ValueError):
    """The text cannot be segmented into speakable spans. `str(err)` is a one-line message
    for the requester."""

    reason = "nothing_speakable"

    def __init_subclass__(cls, *, reason: str = "", **kwargs: Any) -> None:
        # `class X(SegmentationError, reason=...)`: each error's dead-letter reason in its header.
        super().__init_subclass__(**kwargs)
        if reason:
            cls.reason = reason


class TextTooLong(SegmentationError, reason="text_too_long"):
    """More characters than the stage takes (`max_text_chars`)."""


class EmptyText(SegmentationError, reason="empty_text"):
    """No text left once spaces and markup are taken away."""


class UnsupportedLanguageHint(SegmentationError, reason="unsupported_language"):
    """The request names a language no row of the language table speaks."""


class UnsupportedLanguage(SegmentationError, reason="unsupported_language"):
    """Every letter of the text is in a script no row of the language table speaks."""


class InputRejected(SegmentationError):
    """Request text refused by the input policy (before segmentation); `reason` names the rule."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class ExpandedTooLong(SegmentationError, reason="expanded_too_long"):
    """More to say than the request may (its lexicon, numbers and markup read out)."""


class TooManySegments(SegmentationError, reason="too_many_segments"):
    """The text makes more segments than a request may have (`MAX_SEGMENTS`)."""


class UnreadableNumber(SegmentationError, reason="unreadable_number"):
    """A number the reader of its language cannot say (the message names it)."""


class TooCostly(SegmentationError, reason="too_costly"):
    """Planning the request took longer than its budget (`plan_budget`); the message says
    how far it got."""


# Errors of the stage's routing, not of the text (a request fails them whatever it says).
class ReplyTopicNotAllowed(RecordError, ValueError):
    """The request names a reply topic outside the configured reply prefix."""

    reason = "reply_topic_not_allowed"


class UnknownReplyTopicError(RecordError, ValueError):
    """The request names a reply topic that does not exist (auto-creation is off)."""

    reason = "unknown_reply_topic"


class LexiconVersionUnknown(RecordError, ValueError):
    """The request pins a lexicon version this worker does not hold (older than the kept
    history, or never written)."""

    reason = "lexicon_version_unknown"
