"""Errors raised by the text front-end."""


class SegmentationError(ValueError):
    """The text cannot be segmented into speakable spans (empty, nothing speakable, too long,
    or an unsupported language hint). `str(err)` is a one-line message for the requester."""


class InputRejected(SegmentationError):
    """Request text refused by the input policy (before segmentation). `reason` is the
    short cause used in dead letters and metrics."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)
