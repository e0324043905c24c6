"""Errors raised by the audio encoders."""


class EncodingError(ValueError):
    """Base class for encode/decode failures."""


class UnknownFormatError(EncodingError):
    """The requested audio format is not one of `encoders.FORMATS`."""


class EncodeError(EncodingError):
    """The codec failed to encode the samples."""


class DecodeError(EncodingError):
    """The bytes are not valid audio of the stated format."""
