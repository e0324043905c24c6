"""Errors raised by the text front-end."""


class SegmentationError(ValueError):
    """The text cannot be segmented into speakable spans (empty, nothing speakable, too long,
    or an unsupported language hint). `str(err)` is a one-line message for the requester."""
