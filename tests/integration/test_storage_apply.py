"""Storage as code against real MinIO: `streamtts storage apply` turns the tenants' retention
into lifecycle rules that MinIO itself reports, idempotently, keeping other owners' rules."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from minio.commonconfig import ENABLED, Filter
from minio.lifecycleconfig import Expiration, LifecycleConfig, Rule

from streamtts.runtime.s3 import make_minio
from tests.helpers import cli_env
from tests.services import Services

pytestmark = pytest.mark.integration


def _storage(services: Services, bucket: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = cli_env(services.kafka, services.s3, s3_bucket=bucket, **env)
    return subprocess.run(
        [sys.executable, "-m", "streamtts.cli.main", "storage", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _rules(
    services: Services, bucket: str
) -> dict[str, tuple[str | None, tuple[str, str] | None, int | None]]:
    """What MinIO's GetBucketLifecycleConfiguration says: rule id → (prefix, tag, days)."""
    config = make_minio(services.s3, connect_s=3, read_s=10, retries=1, pool=2).get_bucket_lifecycle(bucket)
    out = {}
    for r in config.rules if config else ():
        f = r.rule_filter
        tag = (f.tag.key, f.tag.value) if f is not None and f.tag is not None else None
        out[r.rule_id or ""] = (
            f.prefix if f is not None else None,
            tag,
            r.expiration.days if r.expiration else None,
        )
    return out


def test_storage_apply_writes_lifecycle_rules_idempotently(services: Services) -> None:
    bucket = f"ret-{uuid.uuid4().hex[:10]}"
    retention = {"retention_days": "90", "tenant_retention_days": "acme=30,globex=7,keeper=0"}

    planned = _storage(services, bucket, "apply", "--dry-run", **retention)
    assert planned.returncode == 0, planned.stderr
    assert f"would create   bucket {bucket}" in planned.stdout
    assert "would create   streamtts-tenant-acme: prefix acme/, expire after 30 d" in planned.stdout

    first = _storage(services, bucket, "apply", **retention)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[-1] == (
        f"bucket {bucket}: 6 rules created, 0 altered, 0 deleted, 0 unchanged, 0 of other owners kept"
    )
    assert _rules(services, bucket) == {
        "streamtts-tenant-acme": ("acme/", None, 30),
        "streamtts-tenant-acme-tagged": (None, ("streamtts-tenant", "acme"), 30),
        "streamtts-tenant-globex": ("globex/", None, 7),
        "streamtts-tenant-globex-tagged": (None, ("streamtts-tenant", "globex"), 7),
        "streamtts-default": (None, ("streamtts-retention", "default"), 90),
        "streamtts-expiry-index": ("_expiry/", None, 120),
    }

    again = _storage(services, bucket, "apply", **retention)
    assert again.stdout.splitlines() == [
        f"bucket {bucket}: 0 rules created, 0 altered, 0 deleted, 6 unchanged, 0 of other owners kept"
    ]

    # An operator's own rule is kept; a changed retention alters ours; a dropped tenant's go.
    client = make_minio(services.s3, connect_s=3, read_s=10, retries=1, pool=2)
    current = client.get_bucket_lifecycle(bucket)
    assert current is not None
    own = Rule(ENABLED, rule_filter=Filter(prefix="tmp/"), rule_id="ops-tmp", expiration=Expiration(days=1))
    client.set_bucket_lifecycle(bucket, LifecycleConfig([*current.rules, own]))
    changed = {"retention_days": "90", "tenant_retention_days": "acme=14"}
    diff = _storage(services, bucket, "plan", **changed)
    assert (
        "would alter    streamtts-tenant-acme: prefix acme/, expire after 30 d -> prefix acme/, expire after 14 d"
        in diff.stdout
    )
    assert "would delete   streamtts-tenant-globex" in diff.stdout
    assert len(_rules(services, bucket)) == 7, "plan changes nothing"
    applied = _storage(services, bucket, "apply", **changed)
    assert applied.returncode == 0, applied.stderr
    rules = _rules(services, bucket)
    assert rules["ops-tmp"] == ("tmp/", None, 1)
    assert rules["streamtts-tenant-acme"] == ("acme/", None, 14)
    assert set(rules) == {
        "ops-tmp",
        "streamtts-tenant-acme",
        "streamtts-tenant-acme-tagged",
        "streamtts-default",
        "streamtts-expiry-index",
    }


def test_storage_mistakes_are_one_line(services: Services) -> None:
    bucket = f"ret-{uuid.uuid4().hex[:10]}"
    bad = _storage(services, bucket, "apply", tenant_retention_days="acme=thirty")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
    assert "TENANT_RETENTION_DAYS: expected tenant=days" in bad.stderr
    # A tenant whose prefix rule would also expire the shared render cache is refused.
    clash = _storage(
        services, bucket, "apply", tenant_retention_days="render=3", render_cache_prefix="render/cache/"
    )
    assert clash.returncode == 1 and "would also expire render/cache/" in clash.stderr
