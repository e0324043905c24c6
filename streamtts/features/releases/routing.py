"""Which release renders a request (pure): the routing rule of `tts.config` applied once per
request, so all of a request's segments go to one lane.

Order of precedence: a request header naming a release (when the rule honours headers), the
tenant list, then the sticky percentage. Sticky = a hash of tenant and request id, so a
request re-submitted or replayed under the same id lands on the same release.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from streamtts.schemas import ReleaseConfig

BUCKETS = 10_000
"""Percentages resolve to 0.01 %."""


def bucket(tenant: str, request_id: str) -> int:
    """The request's fixed place in 0..BUCKETS-1 (blake2b: stable across processes and
    Python versions, unlike `hash()`)."""
    digest = hashlib.blake2b(f"{tenant}\0{request_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % BUCKETS


@dataclass(frozen=True)
class Route:
    release: str
    """The lane: the rule's stable release or its candidate."""
    why: str
    """"header", "tenant", "percent" (candidate) or "default" (stable)."""
    rule_version: int | None = None
    """The version of the rule that decided (the rule in force may change while the request
    is still being routed: what is logged is the rule that chose, not the one current then)."""


def route(rule: ReleaseConfig, tenant: str, request_id: str, header: str | None = None) -> Route:
    """The release for one request under `rule`. A header naming a release that is neither the
    rule's stable nor its candidate is ignored (a client cannot reach a retired lane)."""
    if rule.routing and rule.candidate is not None:
        if rule.header and header in (rule.candidate, rule.stable):
            return Route(header, "header", rule.version)
        if tenant in rule.tenants:
            return Route(rule.candidate, "tenant", rule.version)
        if bucket(tenant, request_id) < round(rule.percent * BUCKETS / 100):
            return Route(rule.candidate, "percent", rule.version)
    return Route(rule.stable, "default", rule.version)
