"""Audio retention: how long a tenant's stored files live, as object-storage lifecycle
rules see it, so the `expires_at` the sink promises is the time the store may delete them.

S3 (and MinIO) expire an object `days` after its creation, rounded up to the next midnight
UTC. Rules select a tenant's objects by key prefix (`tenant/…`, the canonical layout, which
also covers files stored before retention existed) and by object tag (files under a replay
namespace, `ns/tenant/…`, which no tenant prefix reaches). Tenants on the default retention
are selected by a tag the sink sets, as a prefix rule cannot say "every other tenant".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from streamtts.runtime.pipeline_settings import PipelineSettings

TENANT_TAG = "streamtts-tenant"
RETENTION_TAG = "streamtts-retention"
DEFAULT_CLASS = "default"
RULE_PREFIX = "streamtts-"
"""Lifecycle rules with ids starting so are ours (`storage apply` leaves other rules alone)."""
EXPIRY_INDEX_PREFIX = "_expiry/"
"""Zero-byte markers `_expiry/TENANT/REQUEST_ID` (metadata: expires-at, key) the sink writes
for every file with an expiry: the gateway answers 410 for an expired request long after its
result has left what it can search. No tenant prefix reaches them (tenants start with a
letter or digit); their own rule keeps them `EXPIRY_INDEX_GRACE_DAYS` past the longest
retention."""
EXPIRY_INDEX_GRACE_DAYS = 30


def expiry_marker_key(tenant: str, request_id: str) -> str:
    return f"{EXPIRY_INDEX_PREFIX}{tenant}/{request_id}"


@dataclass(frozen=True)
class RetentionPolicy:
    default_days: int
    tenants: dict[str, int]

    @classmethod
    def of(cls, pipeline: PipelineSettings) -> RetentionPolicy:
        return cls(pipeline.storage.retention_days, pipeline.storage.tenant_retention())

    def days_for(self, tenant: str) -> int:
        return self.tenants.get(tenant, self.default_days)

    def longest_days(self) -> int:
        """The longest retention any tenant has (0: nothing expires)."""
        return max([self.default_days, *self.tenants.values()])

    def expires_at(self, tenant: str, stored_at: datetime) -> datetime | None:
        """When the store may delete a file stored at `stored_at` (None: kept)."""
        days = self.days_for(tenant)
        if days <= 0:
            return None
        due = stored_at.astimezone(UTC) + timedelta(days=days)
        midnight = datetime.combine(due.date(), time(0), tzinfo=UTC)
        return midnight if due == midnight else midnight + timedelta(days=1)

    def tags_for(self, tenant: str) -> dict[str, str]:
        """Object tags of a tenant's file: which rule selects it wherever its key is."""
        tags = {TENANT_TAG: tenant}
        if tenant not in self.tenants:
            tags[RETENTION_TAG] = DEFAULT_CLASS
        return tags
