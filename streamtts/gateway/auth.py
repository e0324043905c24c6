"""API-key authentication: each key belongs to exactly one tenant."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.datastructures import Headers, QueryParams

from streamtts.gateway.errors import ApiError


@dataclass(frozen=True)
class ApiKeys:
    keys: Mapping[str, str]
    """key → tenant"""

    def tenant_of(self, headers: Headers, query: QueryParams | None = None) -> str:
        """The caller's tenant, or ApiError 401. Keys come from `Authorization: Bearer`,
        `X-API-Key`, or (WebSockets only: browsers cannot set headers there) `?api_key=`."""
        key = _presented_key(headers, query)
        if not key:
            raise ApiError(401, "unauthorized", "missing API key (Authorization: Bearer <key> or X-API-Key)")
        for known, tenant in self.keys.items():
            # Constant-time comparison: response timing must not reveal key prefixes.
            if hmac.compare_digest(known.encode(), key.encode()):
                return tenant
        raise ApiError(401, "unauthorized", "invalid API key")


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
