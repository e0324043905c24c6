"""The API keys in force, with their tenant, id, client-address allowlist and expiry (see
key_files for what defines them); the keys file is re-read while the gateway runs, so keys
rotate without a restart: add the new key, move clients, give the old one a `not_after` —
both work until then.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from streamtts.errors import ConfigError
from streamtts.gateway.key_files import KeySet, from_pairs, load_file
from streamtts.gateway.networks import parse_networks
from streamtts.gateway.settings import GatewaySettings
from streamtts.runtime.jsonlog import log_event

log = logging.getLogger("streamtts.gateway.keys")


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
