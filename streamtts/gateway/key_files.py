"""API keys as the environment and the keys file define them: each key with its tenant, id,
client-address allowlist and expiry.

Two file formats. The original one, one `key:tenant` a line (`#` comments), still works.
A `.yaml`/`.yml`/`.json` file can say more:

    tenants:
      acme: {allow: [10.0.0.0/8, "2001:db8::/32"]}   # every key of acme, from these only
    keys:
      - {id: acme-2026-11, key: "...", tenant: acme, not_after: 2026-12-15T00:00:00Z}
      - {id: acme-2026-12, key: "...", tenant: acme, allow: [10.1.0.0/16]}

A key's `allow` narrows its tenant's (an address must be in both when both are set); a key
past `not_after` is refused (401 `key_expired`). Both the settings (at start) and the key ring
(while running, see keyring) read keys through here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from streamtts.errors import ConfigError
from streamtts.features.audit.log import key_id as hashed_key_id
from streamtts.gateway.networks import Address, Network, contains, parse_networks

TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
STRUCTURED_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class ApiKey:
    key: str = field(repr=False)
    tenant: str
    key_id: str
    """What audit events and logs name the key by (never the key)."""
    allow: tuple[Network, ...] = ()
    """Client networks this key may be used from; empty: any."""
    not_after: datetime | None = None


@dataclass(frozen=True)
class KeySet:
    keys: tuple[ApiKey, ...] = ()
    tenant_allow: Mapping[str, tuple[Network, ...]] = field(default_factory=dict)

    def merged(self, other: KeySet) -> KeySet:
        """`other`'s keys and tenant lists win over ours for the same key / tenant."""
        theirs = {k.key for k in other.keys}
        keys = tuple(k for k in self.keys if k.key not in theirs) + other.keys
        return KeySet(keys, {**self.tenant_allow, **other.tenant_allow})

    def allowed(self, key: ApiKey, address: Address | None) -> bool:
        for networks in (self.tenant_allow.get(key.tenant, ()), key.allow):
            if networks and (address is None or not any(contains(n, address) for n in networks)):
                return False
        return True


def from_pairs(pairs: Mapping[str, str]) -> KeySet:
    """Keys of the `key:tenant` format (env variable or plain keys file)."""
    return KeySet(tuple(ApiKey(k, t, hashed_key_id(k)) for k, t in pairs.items()))


def parse_api_keys(text: str) -> dict[str, str]:
    """`key:tenant` pairs separated by commas or newlines; `#` starts a comment."""
    keys: dict[str, str] = {}
    for raw in re.split(r"[,\n]", text):
        item = raw.split("#", 1)[0].strip()
        if not item:
            continue
        key, sep, tenant = item.rpartition(":")
        if not sep or not key.strip() or not tenant.strip():
            raise ConfigError(f"STREAMTTS_GATEWAY_API_KEYS: expected key:tenant, got {item[:4]}…")
        keys[key.strip()] = tenant.strip()
    return keys


_KEY_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def parse_structured(data: Any, where: str) -> KeySet:
    if not isinstance(data, dict) or not set(data) <= {"keys", "tenants"}:
        raise ConfigError(f"{where}: expected a mapping with `keys` and/or `tenants`")
    tenants: dict[str, tuple[Network, ...]] = {}
    for tenant, spec in (data.get("tenants") or {}).items():
        if not isinstance(spec, dict) or not set(spec) <= {"allow"}:
            raise ConfigError(f"{where}: tenants.{tenant}: expected {{allow: [cidr, ...]}}")
        if "allow" in spec and not spec["allow"]:
            # An empty list would read as "any address": say what is meant instead.
            raise ConfigError(
                f"{where}: tenants.{tenant}.allow is empty: list networks, or leave `allow` out"
            )
        tenants[str(tenant)] = parse_networks(spec.get("allow") or (), f"{where}: tenants.{tenant}.allow")
    keys: list[ApiKey] = []
    seen: set[str] = set()
    for i, item in enumerate(data.get("keys") or ()):
        at = f"{where}: keys[{i}]"
        if not isinstance(item, dict) or not {"key", "tenant"} <= set(item):
            raise ConfigError(f"{at}: needs `key` and `tenant`")
        unknown = set(item) - {"key", "tenant", "id", "allow", "not_after"}
        if unknown:
            raise ConfigError(f"{at}: unknown field(s) {', '.join(sorted(unknown))}")
        key = str(item["key"])
        if not key.strip() or key in seen:
            raise ConfigError(f"{at}: empty or repeated key")
        kid = item.get("id")
        if kid is not None and not _KEY_ID_RE.match(str(kid)):
            raise ConfigError(
                f"{at}.id: letters, digits and . _ : - only, at most 64 (it goes into every audit event)"
            )
        seen.add(key)
        keys.append(
            ApiKey(
                key=key,
                tenant=str(item["tenant"]),
                key_id=str(kid or hashed_key_id(key)),
                allow=parse_networks(item.get("allow") or (), f"{at}.allow"),
                not_after=_when(item.get("not_after"), f"{at}.not_after"),
            )
        )
    return KeySet(tuple(keys), tenants)


def _when(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        try:
            value = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(f"{where}: {value!r} is not an ISO 8601 time") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def load_file(path: Path) -> KeySet:
    """Parse a keys file (either format). Raises ConfigError naming the problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"keys file {path}: cannot read: {err.strerror}") from None
    if path.suffix.lower() in STRUCTURED_SUFFIXES:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"keys file {path}: not valid YAML/JSON ({type(err).__name__})") from None
        keys = parse_structured(data or {}, f"keys file {path}")
    else:
        keys = from_pairs(parse_api_keys(text))
    for k in keys.keys:
        if not TENANT_RE.match(k.tenant):
            raise ConfigError(f"keys file {path}: tenant {k.tenant!r} must match {TENANT_RE.pattern}")
    return keys


def tenants_by_key(key_file: str) -> dict[str, str]:
    """Key → tenant of the keys file, as the settings read it at start: a structured file is
    checked whole (`load_file`), a plain one only parsed (the settings check its tenants)."""
    path = Path(key_file)
    if path.suffix.lower() in STRUCTURED_SUFFIXES:
        return {k.key: k.tenant for k in load_file(path).keys}
    try:
        return parse_api_keys(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(
            f"STREAMTTS_GATEWAY_API_KEYS_FILE: cannot read {key_file}: {err.strerror}"
        ) from None
