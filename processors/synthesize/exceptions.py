"""Errors raised by the speech engines, the voice registry and the synthesizer."""

from __future__ import annotations

from streamtts.errors import RecordError


class SynthesisError(RecordError):
    """Base class for speech-core failures."""


class UnknownVoiceError(SynthesisError, ValueError):
    """A voice id (or a part of a blend) is not registered. The message lists the voices."""

    reason = "unknown_voice"


class UnsupportedLanguageError(SynthesisError, ValueError):
    """No engine/phonemizer can speak the requested language."""

    reason = "unsupported_language"


class ModelLoadError(SynthesisError):
    """Model weights are missing, corrupted (checksum mismatch) or cannot be loaded."""

    reason = "model_load_failed"


class InvalidVoiceError(SynthesisError, ValueError):
    """A user voice file or a blend expression is malformed."""

    reason = "unknown_voice"


class InvalidParameterError(SynthesisError, ValueError):
    """A request parameter (speed, sample rate) is out of range."""

    reason = "invalid_parameter"


class Preempted(Exception):  # a scheduling outcome, not an error
    """A bulk run was stopped so that a first span could have its lane; it runs again.

    Deliberately not a SynthesisError/RuntimeError: the renderer's degradation chain must let
    it through (it is no failure of the voice), up to the lanes that re-queue the run.
    """
