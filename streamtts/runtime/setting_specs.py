"""Reflection over a settings root (`PipelineSettings`): each setting's environment variable,
config-file keys, kind and choices, derived from the group dataclasses' fields, and the checks
every group shares."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, Literal, get_args, get_origin, get_type_hints

from streamtts.errors import ConfigError
from streamtts.runtime.env_vars import ENV_PREFIX, bool_of


@dataclass(frozen=True)
class SettingSpec:
    """One pipeline setting as the environment and the config file see it."""

    group: str
    """Its group's attribute on PipelineSettings ("render_cache")."""
    name: str
    """Its field in the group ("mb")."""
    env: str
    """Its environment variable ("STREAMTTS_RENDER_CACHE_MB")."""
    kind: type
    """int, float, bool, str, or tuple (a list of strings)."""
    choices: tuple[str, ...]
    """The allowed values of a Literal field; () for any."""
    default: Any

    @property
    def flat(self) -> str:
        """Its flat name: `[pipeline] <flat>` in the config file, `PipelineSettings.of(<flat>=…)`."""
        return self.env.removeprefix(ENV_PREFIX).lower()

    @property
    def key(self) -> str:
        """Its grouped config-file key, `pipeline.<group>.<name>`."""
        return f"pipeline.{self.group}.{self.name}"

    def parse(self, raw: str) -> Any:
        """The variable's text as this setting's value; a bad one is a ConfigError naming it."""
        if self.kind is tuple:
            return tuple(v.strip() for v in raw.split(",") if v.strip())
        if self.kind is bool:
            return bool_of(raw, self.env, self.default)
        if raw == "":
            return self.default
        if self.kind is int or self.kind is float:
            try:
                return self.kind(raw)
            except ValueError:
                kind = "an integer" if self.kind is int else "a number"
                raise ConfigError(f"{self.env} must be {kind}, got {raw!r}") from None
        return raw  # a Literal's choices are checked by the group


@functools.cache
def specs_of(root: type) -> tuple[SettingSpec, ...]:
    """Every setting of `root`'s groups, group by group, in declaration order."""
    out: list[SettingSpec] = []
    for group, cls in group_types(root).items():
        hints = get_type_hints(cls)
        for f in fields(cls):
            kind, choices = _kind_of(hints[f.name])
            env = ENV_PREFIX + f.metadata.get("env", cls.env_prefix + f.name.upper())
            out.append(SettingSpec(group, f.name, env, kind, choices, f.default))
    return tuple(out)


@functools.cache
def group_types(root: type) -> Mapping[str, Any]:
    """Group attribute → its class ("text" → TextSettings), read-only."""
    hints = get_type_hints(root)
    return MappingProxyType({f.name: hints[f.name] for f in fields(root)})


def _kind_of(hint: Any) -> tuple[type, tuple[str, ...]]:
    if get_origin(hint) is Literal:
        return str, tuple(get_args(hint))
    if get_origin(hint) is tuple:
        return tuple, ()
    if hint in (int, float, bool, str):
        return hint, ()
    raise TypeError(f"a pipeline setting is int, float, bool, str, a Literal or tuple[str, ...]: {hint}")


def check_fields(group: Any, root: type, at_least_one: tuple[str, ...] = ()) -> None:
    """The checks every group shares: Literal choices, settings that must be ≥ 1."""
    for spec in specs_of(root):
        if type(group) is not group_types(root)[spec.group]:
            continue
        value = getattr(group, spec.name)
        if spec.choices and value not in spec.choices:
            allowed = ", ".join(spec.choices[:-1]) + " or " + spec.choices[-1]
            raise ConfigError(f"{spec.env} must be {allowed}, got {value!r}")
        if spec.name in at_least_one and value < 1:
            raise ConfigError(f"{spec.env} must be at least 1, got {value}")
