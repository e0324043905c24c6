"""Storage as code: the audio bucket's lifecycle rules follow the tenants' retention.

`streamtts storage apply` creates the bucket if missing and reconciles the lifecycle rules
whose ids start with `streamtts-` with the configured retention (features.retention.policy): one
prefix rule and one tag rule per tenant with its own retention, one tag rule for the
default; rules with other ids (an operator's own) are kept as they are. Applying twice
changes nothing the second time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minio import Minio
from minio.commonconfig import ENABLED, Filter, Tag
from minio.error import S3Error
from minio.lifecycleconfig import Expiration, LifecycleConfig, Rule

from streamtts.errors import ConfigError
from streamtts.features.retention.policy import (
    DEFAULT_CLASS,
    EXPIRY_INDEX_GRACE_DAYS,
    EXPIRY_INDEX_PREFIX,
    RETENTION_TAG,
    RULE_PREFIX,
    TENANT_TAG,
    RetentionPolicy,
)


@dataclass(frozen=True, order=True)
class RuleSpec:
    rule_id: str
    days: int
    prefix: str | None = None
    tag: tuple[str, str] | None = None

    def describe(self) -> str:
        if self.prefix is not None:
            return f"prefix {self.prefix}, expire after {self.days} d"
        assert self.tag is not None
        return f"tag {self.tag[0]}={self.tag[1]}, expire after {self.days} d"

    def to_rule(self) -> Rule:
        if self.prefix is not None:
            rule_filter = Filter(prefix=self.prefix)
        else:
            assert self.tag is not None
            rule_filter = Filter(tag=Tag(*self.tag))
        return Rule(
            ENABLED, rule_filter=rule_filter, rule_id=self.rule_id, expiration=Expiration(days=self.days)
        )


def desired_rules(policy: RetentionPolicy, reserved_prefixes: tuple[str, ...] = ()) -> list[RuleSpec]:
    """The rules a retention policy needs. `reserved_prefixes`: key prefixes of other data in
    the bucket (the render cache) that no tenant's prefix rule may reach."""
    rules = []
    for tenant, days in sorted(policy.tenants.items()):
        for reserved in reserved_prefixes:
            if reserved.startswith(f"{tenant}/"):
                raise ConfigError(
                    f"tenant {tenant!r}: its retention rule (prefix {tenant}/) would also expire {reserved}…"
                )
        if days > 0:
            rules.append(RuleSpec(f"{RULE_PREFIX}tenant-{tenant}", days, prefix=f"{tenant}/"))
            rules.append(RuleSpec(f"{RULE_PREFIX}tenant-{tenant}-tagged", days, tag=(TENANT_TAG, tenant)))
    if policy.default_days > 0:
        rules.append(
            RuleSpec(f"{RULE_PREFIX}default", policy.default_days, tag=(RETENTION_TAG, DEFAULT_CLASS))
        )
    if policy.longest_days() > 0:
        # The markers that let the gateway say 410 outlive the files they stand for.
        days = policy.longest_days() + EXPIRY_INDEX_GRACE_DAYS
        rules.append(RuleSpec(f"{RULE_PREFIX}expiry-index", days, prefix=EXPIRY_INDEX_PREFIX))
    return rules


def spec_of(rule: Rule) -> RuleSpec | None:
    """Our view of an existing rule (None: a shape we never write, so it differs)."""
    days = rule.expiration.days if rule.expiration is not None else None
    f = rule.rule_filter
    if rule.status != ENABLED or days is None or f is None or f.and_operator is not None:
        return None
    if f.tag is not None:
        return RuleSpec(rule.rule_id or "", days, tag=(f.tag.key, f.tag.value))
    return RuleSpec(rule.rule_id or "", days, prefix=f.prefix if f.prefix is not None else "")


@dataclass
class StoragePlan:
    bucket: str
    create_bucket: bool = False
    create: list[RuleSpec] = field(default_factory=list)
    alter: list[tuple[str, RuleSpec]] = field(default_factory=list)
    """(how the rule reads now, the rule it becomes)"""
    delete: list[str] = field(default_factory=list)
    unchanged: list[RuleSpec] = field(default_factory=list)
    others: list[Rule] = field(default_factory=list)
    """Rules that are not ours: kept."""

    @property
    def changes(self) -> bool:
        return bool(self.create_bucket or self.create or self.alter or self.delete)

    def rules(self) -> list[Rule]:
        ours = [*self.create, *(new for _, new in self.alter), *self.unchanged]
        return self.others + [r.to_rule() for r in sorted(ours)]


def plan(client: Minio, bucket: str, desired: list[RuleSpec]) -> StoragePlan:
    out = StoragePlan(bucket)
    existing: dict[str, Rule] = {}
    if not client.bucket_exists(bucket):
        out.create_bucket = True
    else:
        config = client.get_bucket_lifecycle(bucket)
        for rule in config.rules if config is not None else ():
            rule_id = rule.rule_id or ""
            if rule_id.startswith(RULE_PREFIX):
                existing[rule_id] = rule
            else:
                out.others.append(rule)
    wanted = {r.rule_id: r for r in desired}
    for rule_id, spec in sorted(wanted.items()):
        have = existing.get(rule_id)
        if have is None:
            out.create.append(spec)
            continue
        now = spec_of(have)
        if now == spec:
            out.unchanged.append(spec)
        else:
            out.alter.append((now.describe() if now is not None else "another shape", spec))
    out.delete = sorted(set(existing) - set(wanted))
    return out


def apply(client: Minio, storage_plan: StoragePlan) -> None:
    bucket = storage_plan.bucket
    if storage_plan.create_bucket:
        try:
            client.make_bucket(bucket)
        except S3Error as err:
            if err.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise
    if not storage_plan.changes:
        return
    rules = storage_plan.rules()
    if rules:
        client.set_bucket_lifecycle(bucket, LifecycleConfig(rules))
    else:
        client.delete_bucket_lifecycle(bucket)
