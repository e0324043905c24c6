"""Optional configuration file (TOML or YAML) layered under the environment.

Precedence: environment > file > built-in defaults. File keys are `section.key`:

    [kafka]   bootstrap, security_protocol, sasl_mechanism, sasl_username, topic_prefix, ssl_cafile
    [s3]      endpoint, access_key, region, bucket
    [pipeline.<group>]  any field of that PipelineSettings group ([pipeline.text] first_max_chars,
                        [pipeline.render_cache] mb, …), as `streamtts config show` prints them
    [pipeline] the same settings by flat name: the variable without STREAMTTS_, lower case
               (first_max_chars, render_cache_mb, release, …), as before the groups
    log_level

Secrets (Kafka SASL password, S3 secret key) are accepted only from the environment.
Every problem fails at start with one line naming the key.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping, MutableMapping
from dataclasses import fields
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from streamtts.errors import ConfigError
from streamtts.runtime.env_vars import ENV_PREFIX
from streamtts.runtime.pipeline_settings import PipelineSettings, specs

SECRET_KEYS = {"kafka.sasl_password", "s3.secret_key"}
_CONNECTION_KEYS: dict[str, tuple[str, type]] = {
    "kafka.bootstrap": ("KAFKA_BOOTSTRAP", str),
    "kafka.security_protocol": ("KAFKA_SECURITY_PROTOCOL", str),
    "kafka.sasl_mechanism": ("KAFKA_SASL_MECHANISM", str),
    "kafka.sasl_username": ("KAFKA_SASL_USERNAME", str),
    "kafka.topic_prefix": ("TOPIC_PREFIX", str),
    "kafka.ssl_cafile": ("KAFKA_CAFILE", str),
    "s3.endpoint": ("S3_ENDPOINT", str),
    "s3.access_key": ("S3_ACCESS_KEY", str),
    "s3.region": ("S3_REGION", str),
    "s3.bucket": ("S3_BUCKET", str),
    "log_level": ("LOG_LEVEL", str),
}


class FileKey(NamedTuple):
    """What a config-file key sets: a variable (without STREAMTTS_), its type, its choices."""

    env: str
    kind: type
    choices: tuple[str, ...] = ()


def known_keys() -> dict[str, FileKey]:
    """Every accepted key. A pipeline setting has two: `pipeline.<group>.<field>` and its flat
    `pipeline.<name>`, both derived from the field (see `settings.specs`)."""
    keys = {key: FileKey(env, kind) for key, (env, kind) in _CONNECTION_KEYS.items()}
    for spec in specs():
        key = FileKey(spec.env.removeprefix(ENV_PREFIX), spec.kind, spec.choices)
        keys[spec.key] = keys[f"pipeline.{spec.flat}"] = key
    return keys


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, full + "."))
        else:
            out[full] = value
    return out


def _convert(key: str, value: Any, kind: type, choices: tuple[str, ...] = ()) -> str:
    if choices and value not in choices:
        raise ConfigError(f"config: {key} must be one of {', '.join(choices)}, got {value!r}")
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"config: {key} must be true or false, got {value!r}")
        return "1" if value else "0"
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"config: {key} must be an integer, got {value!r}")
        return str(value)
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"config: {key} must be a number, got {value!r}")
        return str(value)
    if kind is tuple:
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return ",".join(value)
        raise ConfigError(f"config: {key} must be a list of strings, got {value!r}")
    if not isinstance(value, str):
        raise ConfigError(f"config: {key} must be a string, got {value!r}")
    return value


def load_config_file(path: str | Path) -> dict[str, str]:
    """Parse and validate a config file into STREAMTTS_* variable values."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise ConfigError(f"cannot read config {p}: {err.strerror or err}") from None
    try:
        data = tomllib.loads(text) if p.suffix == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as err:
        raise ConfigError(
            f"config {p} is not valid {'TOML' if p.suffix == '.toml' else 'YAML'}: {str(err).splitlines()[0]}"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"config {p}: expected a mapping at the top level")
    keys = known_keys()
    out: dict[str, str] = {}
    set_by: dict[str, str] = {}
    for key, value in _flatten(data).items():
        if key in SECRET_KEYS:
            raise ConfigError(
                f"config: {key} is a secret: set {ENV_PREFIX}{key.split('.')[0].upper()}_"
                f"{key.split('.')[1].upper()} in the environment instead"
            )
        if key not in keys:
            raise ConfigError(f"config: unknown key {key!r}")
        env_name, kind, choices = keys[key]
        if env_name in set_by:
            raise ConfigError(f"config: {set_by[env_name]} and {key} are the same setting: keep one")
        set_by[env_name] = key
        out[ENV_PREFIX + env_name] = _convert(key, value, kind, choices)
    return out


def apply_config(path: str | Path | None, environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Layer the file under the environment (only unset variables are filled). Returns them."""
    environ = os.environ if environ is None else environ
    if path is None:
        return {}
    values = load_config_file(path)
    applied = {k: v for k, v in values.items() if k not in environ}
    environ.update(applied)
    return applied


def effective_config() -> dict[str, Any]:
    """The configuration every command would use now, secrets masked."""
    from streamtts.runtime.settings import Settings

    settings = Settings.from_env()
    pipeline = PipelineSettings.from_env()
    mask = "****"
    return {
        "log_level": os.environ.get(ENV_PREFIX + "LOG_LEVEL", "INFO"),
        "kafka": {
            "bootstrap": settings.kafka.bootstrap_servers,
            "security_protocol": settings.kafka.security_protocol,
            "sasl_mechanism": settings.kafka.sasl_mechanism,
            "sasl_username": settings.kafka.sasl_username,
            "sasl_password": mask if settings.kafka.sasl_password else None,
            "topic_prefix": settings.kafka.topic_prefix,
            "ssl_cafile": settings.kafka.ssl_cafile,
        },
        "s3": {
            # The scheme carries `secure`, as in STREAMTTS_S3_ENDPOINT.
            "endpoint": ("https://" if settings.s3.secure else "http://") + settings.s3.endpoint,
            "access_key": settings.s3.access_key,
            "secret_key": mask if settings.s3.secret_key else None,
            "region": settings.s3.region,
            "bucket": settings.s3.bucket,
        },
        # One table per group, [pipeline.text] …, field by field.
        "pipeline": {
            f.name: {
                g.name: getattr(getattr(pipeline, f.name), g.name) for g in fields(getattr(pipeline, f.name))
            }
            for f in fields(PipelineSettings)
        },
    }


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a TOML basic string


def render_toml(config: Mapping[str, Any]) -> str:
    """`effective_config()` as a TOML file that `--config` accepts back: unset values and
    secrets (environment only) become comments; each key notes the variable that overrides it."""
    lines: list[str] = []
    keys = known_keys()

    def emit(key: str, full: str, value: Any) -> None:
        if full in SECRET_KEYS:
            env = f"{ENV_PREFIX}{full.replace('.', '_').upper()}"
            shown = "****" if value else "(unset)"
            lines.append(f"# {key} = {shown}  (secret: set {env} in the environment)")
            return
        line = f"# {key} = (unset)" if value is None else f"{key} = {_toml_value(value)}"
        lines.append(f"{line}  # {ENV_PREFIX}{keys[full].env}" if full in keys else line)

    def table(prefix: str, values: Mapping[str, Any]) -> None:
        # Plain keys first: in TOML a key after a [table] header belongs to that table.
        plain = {k: v for k, v in values.items() if not isinstance(v, Mapping)}
        if prefix and plain:
            lines.extend(["", f"[{prefix}]"])
        for key, value in plain.items():
            emit(key, f"{prefix}.{key}" if prefix else key, value)
        for key, value in values.items():
            if isinstance(value, Mapping):
                table(f"{prefix}.{key}" if prefix else key, value)

    table("", config)
    return "\n".join(lines) + "\n"
