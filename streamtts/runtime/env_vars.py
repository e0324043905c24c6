"""STREAMTTS_* environment variables read as numbers and switches: a malformed value is one
ConfigError naming the variable."""

from __future__ import annotations

import os
from typing import TypeVar

from streamtts.errors import ConfigError

ENV_PREFIX = "STREAMTTS_"
N = TypeVar("N", int, float)


def env_str(name: str, default: str) -> str:
    return os.environ.get(ENV_PREFIX + name, default)


def env_number(name: str, default: N, cast: type[N], kind: str, prefix: str = ENV_PREFIX) -> N:
    """`prefix + name` from the environment as a number; unset or empty → `default`."""
    raw = os.environ.get(prefix + name)
    if raw is None or raw == "":
        return default
    try:
        return cast(raw)
    except ValueError:
        raise ConfigError(f"{prefix}{name} must be {kind}, got {raw!r}") from None


def env_int(name: str, default: int, prefix: str = ENV_PREFIX) -> int:
    return env_number(name, default, int, "an integer", prefix)


def env_float(name: str, default: float, prefix: str = ENV_PREFIX) -> float:
    return env_number(name, default, float, "a number", prefix)


def env_bool(name: str, default: bool, prefix: str = ENV_PREFIX) -> bool:
    return bool_of(os.environ.get(prefix + name, ""), prefix + name, default)


def bool_of(raw: str, variable: str, default: bool) -> bool:
    raw = raw.strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{variable} must be true or false (1/0), got {raw!r}")
