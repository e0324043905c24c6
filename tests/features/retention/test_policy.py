"""Retention policy: expiry as S3 lifecycle counts it, tags per tenant, rules per policy."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from streamtts.errors import ConfigError
from streamtts.features.retention.lifecycle import RuleSpec, desired_rules
from streamtts.features.retention.policy import RetentionPolicy
from streamtts.runtime.pipeline_settings import PipelineSettings


def test_expiry_is_the_next_midnight_utc_after_stored_plus_days() -> None:
    policy = RetentionPolicy(default_days=0, tenants={"acme": 30})
    stored = datetime(2026, 12, 1, 18, 30, tzinfo=UTC)
    assert policy.expires_at("acme", stored) == datetime(2027, 1, 1, tzinfo=UTC)
    assert policy.expires_at("acme", datetime(2026, 12, 1, tzinfo=UTC)) == datetime(2026, 12, 31, tzinfo=UTC)
    assert policy.expires_at("other", stored) is None, "no default: kept"


def test_tags_say_which_rule_selects_a_file() -> None:
    policy = RetentionPolicy(default_days=90, tenants={"acme": 30, "keeper": 0})
    assert policy.tags_for("acme") == {"streamtts-tenant": "acme"}
    assert policy.tags_for("keeper") == {"streamtts-tenant": "keeper"}
    assert policy.tags_for("beta") == {"streamtts-tenant": "beta", "streamtts-retention": "default"}
    assert desired_rules(policy) == [
        RuleSpec("streamtts-tenant-acme", 30, prefix="acme/"),
        RuleSpec("streamtts-tenant-acme-tagged", 30, tag=("streamtts-tenant", "acme")),
        RuleSpec("streamtts-default", 90, tag=("streamtts-retention", "default")),
        # The 410 markers outlive the longest retention by 30 days.
        RuleSpec("streamtts-expiry-index", 120, prefix="_expiry/"),
    ]
    assert desired_rules(RetentionPolicy(default_days=0, tenants={})) == []


def test_settings_validate_retention() -> None:
    s = PipelineSettings.of(retention_days=7, tenant_retention_days=("acme=30",))
    assert (s.storage.retention_for("acme"), s.storage.retention_for("beta")) == (30, 7)
    with pytest.raises(ConfigError, match="tenant=days"):
        PipelineSettings.of(tenant_retention_days=("acme=-1",))
    with pytest.raises(ConfigError, match="RETENTION_DAYS must be ≥ 0"):
        PipelineSettings.of(retention_days=-1)
