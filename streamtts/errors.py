"""Errors of the whole project (bottom layer): what the CLI reports as one line, and what a
stage does with a record that failed.

A record's failure carries its own dead-letter reason (`reason`, a short filterable label used
by DLQ headers, metrics and `replay --reason`) and whether retrying can help (`transient`).
Nothing matches on message text.
"""

from __future__ import annotations

from typing import ClassVar


class StreamTTSError(Exception):
    """Base class: anything the user can act on. `str(err)` is the one-line message."""


class ConfigError(StreamTTSError):
    """Invalid configuration or arguments."""


class InfraError(StreamTTSError):
    """Local infrastructure could not be installed, started or reached."""


class RecordError(Exception):
    """One record cannot be processed. Subclasses name their dead-letter `reason`.

    `reason` is a class attribute; an error whose reason depends on the case (a contract
    violation: missing vs. extra field) sets it on the instance.
    """

    reason: str = "processing_error"
    transient: ClassVar[bool] = False
    """True: the same record may succeed later (storage down); False: retrying cannot help."""


class TransientError(RecordError):
    """A dependency failed (timeout, outage); the record itself is fine."""

    transient: ClassVar[bool] = True


def failure_reason(exc: BaseException) -> str:
    """The short cause of a failure, for dead letters, metrics labels and replay filters."""
    if isinstance(exc, RecordError):
        return exc.reason
    if isinstance(exc, TimeoutError):
        return "timeout"
    return "processing_error"


def is_transient(exc: BaseException) -> bool:
    """Whether the same record may succeed later: a dependency's fault, not the record's."""
    if isinstance(exc, RecordError):
        return exc.transient
    return isinstance(exc, TimeoutError | ConnectionError)
