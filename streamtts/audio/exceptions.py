"""Errors raised by the audio codecs."""

from __future__ import annotations

from streamtts.errors import RecordError


class EncodingError(RecordError, ValueError):
    """Base class for encode/decode failures."""


class UnknownFormatError(EncodingError):
    """The requested audio format is not one of `formats.names()`."""

    reason = "unknown_format"


class EncodeError(EncodingError):
    """The codec failed to encode the samples."""


class DecodeError(EncodingError):
    """The bytes are not valid audio of the stated format."""
