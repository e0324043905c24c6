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

from streamtts.runtime.settings import PipelineSettings

TENANT_TAG = "streamtts-tenant"
RETENTION_TAG = "streamtts-retention"
DEFAULT_CLASS = "default"
RULE_PREFIX = "streamtts-"
"""Lifecycle rules with ids starting so are ours (`storage apply` leaves other rules alone)."""


@dataclass(frozen=True)
class RetentionPolicy:
    default_days: int
    tenants: dict[str, int]

    @classmethod
    def of(cls, pipeline: PipelineSettings) -> RetentionPolicy:
        return cls(pipeline.retention_days, pipeline.tenant_retention())

    def days_for(self, tenant: str) -> int:
        return self.tenants.get(tenant, self.default_days)

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
