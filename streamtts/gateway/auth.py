"""API-key authentication: each key belongs to exactly one tenant, may be limited to client
networks and may expire (rotation). The keys come from a `KeyRing` that can be re-read."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import UTC, datetime

from starlette.datastructures import Headers, QueryParams

from streamtts.gateway.errors import ApiError
from streamtts.gateway.key_files import ApiKey
from streamtts.gateway.keyring import KeyRing
from streamtts.gateway.networks import Address


@dataclass(frozen=True)
class Identity:
    tenant: str
    key_id: str


@dataclass
class ApiKeys:
    ring: KeyRing

    def lookup(self, headers: Headers, query: QueryParams | None = None) -> ApiKey:
        """The presented key, or ApiError 401. Keys come from `Authorization: Bearer`,
        `X-API-Key`, or (WebSockets only: browsers cannot set headers there) `?api_key=`."""
        presented = _presented_key(headers, query)
        if not presented:
            raise ApiError(401, "unauthorized", "missing API key (Authorization: Bearer <key> or X-API-Key)")
        found: ApiKey | None = None
        for known in self.ring.current.keys:
            # Constant-time comparison, and no early exit: timing reveals neither prefixes
            # nor where in the list a key sits.
            if hmac.compare_digest(known.key.encode(), presented.encode()):
                found = known
        if found is None:
            raise ApiError(401, "unauthorized", "invalid API key")
        return found

    def check(self, key: ApiKey, address: Address | None, now: datetime | None = None) -> Identity:
        """ApiError 401 `key_expired` past the key's `not_after`, 403 `denied_address` from
        outside its or its tenant's allowlist; else who the caller is."""
        if key.not_after is not None and (now or datetime.now(UTC)) >= key.not_after:
            raise ApiError(401, "key_expired", f"this API key expired at {key.not_after.isoformat()}")
        if not self.ring.current.allowed(key, address):
            shown = str(address) if address is not None else "unknown"
            raise ApiError(403, "denied_address", f"client address {shown} is not allowed for this API key")
        return Identity(key.tenant, key.key_id)


def _presented_key(headers: Headers, query: QueryParams | None) -> str:
    auth = headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if headers.get("x-api-key"):
        return headers["x-api-key"].strip()
    if query is not None:
        return query.get("api_key", "").strip()
    return ""
