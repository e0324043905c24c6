"""API keys with their tenant, id, client-address allowlist and expiry; the keys file is
re-read while the gateway runs, so keys rotate without a restart.

Two file formats. The original one, one `key:tenant` a line (`#` comments), still works.
A `.yaml`/`.yml`/`.json` file can say more:

    tenants:
      acme: {allow: [10.0.0.0/8, "2001:db8::/32"]}   # every key of acme, from these only
    keys:
      - {id: acme-2026-11, key: "...", tenant: acme, not_after: 2026-12-15T00:00:00Z}
      - {id: acme-2026-12, key: "...", tenant: acme, allow: [10.1.0.0/16]}

A key's `allow` narrows its tenant's (an address must be in both when both are set); a key
past `not_after` is refused (401 `key_expired`). Rotation: add the new key, move clients,
give the old one a `not_after` — both work until then.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from streamtts.errors import ConfigError
from streamtts.features.audit.log import key_id as hashed_key_id
from streamtts.gateway.settings import TENANT_RE, GatewaySettings, parse_api_keys
from streamtts.runtime.jsonlog import log_event

log = logging.getLogger("streamtts.gateway.keys")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
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


def contains(network: Network, address: Address) -> bool:
    if network.version != address.version:
        # An IPv4 client on a dual-stack socket appears as ::ffff:a.b.c.d.
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        return mapped is not None and mapped in network
    return address in network


def parse_networks(values: Iterable[Any], where: str) -> tuple[Network, ...]:
    out = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(str(value).strip(), strict=False))
        except ValueError:
            raise ConfigError(f"{where}: {value!r} is not an IP address or CIDR network") from None
    return tuple(out)


def from_pairs(pairs: Mapping[str, str]) -> KeySet:
    """Keys of the `key:tenant` format (env variable or plain keys file)."""
    return KeySet(tuple(ApiKey(k, t, hashed_key_id(k)) for k, t in pairs.items()))


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


class KeyRing:
    """The keys in force: the static ones (environment) plus the keys file, re-read by
    `reload_if_changed()`. An invalid new file keeps the keys in force and logs an error."""

    def __init__(self, static: KeySet, path: Path | None = None) -> None:
        self.static = static
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self.current = static
        if path is not None:
            self._stamp = self._stat()
            self.current = static.merged(load_file(path))  # at start, a bad file is fatal

    @classmethod
    def from_settings(cls, settings: GatewaySettings) -> KeyRing:
        """The environment's keys and tenant allowlists, plus the keys file."""
        path = Path(settings.api_keys_file) if settings.api_keys_file else None
        static = from_pairs(settings.api_keys)
        tenant_allow = {
            t: parse_networks(nets, f"STREAMTTS_GATEWAY_TENANT_ALLOW: {t}")
            for t, nets in settings.tenant_allow.items()
        }
        if path is not None:
            # Keys the file defines belong to the file: when a reload drops them they must go,
            # although `settings.api_keys` (read at start, env and file merged) still lists them.
            in_file = {k.key for k in load_file(path).keys}
            static = KeySet(tuple(k for k in static.keys if k.key not in in_file))
        return cls(KeySet(static.keys, tenant_allow), path)

    def reload_if_changed(self) -> str:
        """Re-read the file if its mtime, size or inode changed. Returns "unchanged", "ok"
        (new keys in force) or "invalid" (the file did not parse: the old keys stay)."""
        if self.path is None:
            return "unchanged"
        stamp = self._stat()
        if stamp == self._stamp:
            return "unchanged"
        self._stamp = stamp
        try:
            loaded = load_file(self.path)
        except ConfigError as err:
            log_event(log, "keys_reload_failed", logging.ERROR, error=str(err), kept=len(self.current.keys))
            return "invalid"
        self.current = self.static.merged(loaded)
        log_event(log, "keys_reloaded", keys=len(self.current.keys), key_ids=[k.key_id for k in loaded.keys])
        return "ok"

    def _stat(self) -> tuple[int, int, int] | None:
        assert self.path is not None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)
