"""Errors that the CLI reports as one clear line instead of a traceback."""


class StreamTTSError(Exception):
    """Base class: anything the user can act on. `str(err)` is the one-line message."""


class ConfigError(StreamTTSError):
    """Invalid configuration or arguments."""


class InfraError(StreamTTSError):
    """Local infrastructure could not be installed, started or reached."""
