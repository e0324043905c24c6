"""Errors raised by the speech engines, the voice registry and the synthesizer."""


class SynthesisError(Exception):
    """Base class for speech-core failures."""


class UnknownVoiceError(SynthesisError, ValueError):
    """A voice id (or a part of a blend) is not registered. The message lists the voices."""


class UnsupportedLanguageError(SynthesisError, ValueError):
    """No engine/phonemizer can speak the requested language."""


class ModelLoadError(SynthesisError):
    """Model weights are missing, corrupted (checksum mismatch) or cannot be loaded."""


class InvalidVoiceError(SynthesisError, ValueError):
    """A user voice file or a blend expression is malformed."""


class InvalidParameterError(SynthesisError, ValueError):
    """A request parameter (speed, sample rate) is out of range."""
