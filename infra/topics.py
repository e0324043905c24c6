"""Declarative topic spec (infra/topics.yaml) and its reconciliation with a live cluster.

`apply` is safe to run repeatedly: it creates missing topics, grows partition counts, aligns
configs, and reports what it could not fix (a partition count above the spec cannot shrink, a
replication factor is not changed by apply). A *profile* of the spec (replication factor 3 and
`min.insync.replicas=2` on a cluster of three or more) is chosen from the cluster's size.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import for_code

from streamtts.errors import ConfigError, InfraError
from streamtts.runtime.kafka import started_admin
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import TOPOLOGY, topology_topics

SPEC_PATH = Path(__file__).resolve().parent / "topics.yaml"
AUTO_PROFILE = "auto"
"""Profile choice: the one whose `brokers` is the largest the cluster reaches."""
NO_PROFILE = "none"


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicProfile:
    """Overrides for every topic on a cluster of at least `brokers` brokers."""

    name: str
    brokers: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)

    def apply(self, specs: list[TopicSpec]) -> list[TopicSpec]:
        return [
            replace(s, replication_factor=self.replication_factor, configs={**s.configs, **self.configs})
            for s in specs
        ]


@dataclass
class ApplyReport:
    created: list[str] = field(default_factory=list)
    partitions_grown: list[str] = field(default_factory=list)
    configs_altered: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)
    """Differences that apply cannot fix, described in one line each."""
    profile: str | None = None
    """The profile applied (None: the plain spec)."""


TEMPLATES = ("dead_letters", "stage_topics")
"""The spec's `templates`: for a topology topic it does not list (a dead-letter topic, or
another stage topic)."""


def load_spec(path: Path = SPEC_PATH, prefix: str = "") -> list[TopicSpec]:
    """Parse the YAML spec: its topics, then every topic the topology names that it does not
    list, from its `templates` (if it has them). Raises ConfigError naming the offending
    topic/key."""
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read topic spec {path}: {err}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("topics"), dict):
        raise ConfigError(f"topic spec {path}: expected a mapping with a 'topics' key")
    defaults = raw.get("defaults") or {}
    default_rf = int(defaults.get("replication_factor", 1))
    default_cfg = {str(k): str(v) for k, v in (defaults.get("configs") or {}).items()}

    def topic(label: str, body: Any, name: str) -> TopicSpec:
        """The spec `body` gives topic `name`; errors name `label` (a topic or a template)."""
        body = body or {}
        unknown = set(body) - {"partitions", "replication_factor", "configs"}
        if unknown:
            raise ConfigError(f"topic spec: {label} has unknown key {sorted(unknown)[0]!r}")
        partitions = body.get("partitions")
        if not isinstance(partitions, int) or partitions < 1:
            raise ConfigError(f"topic spec: {label} needs 'partitions' ≥ 1")
        configs = dict(default_cfg)
        configs.update({str(k): str(v) for k, v in (body.get("configs") or {}).items()})
        return TopicSpec(
            name=name,
            partitions=partitions,
            replication_factor=int(body.get("replication_factor", default_rf)),
            configs=configs,
        )

    specs = [topic(f"topic {name!r}", body, f"{prefix}{name}") for name, body in raw["topics"].items()]
    templates = raw.get("templates") or {}
    if unknown := set(templates) - set(TEMPLATES):
        raise ConfigError(
            f"topic spec: unknown template {sorted(unknown)[0]!r}; templates are {', '.join(TEMPLATES)}"
        )
    listed = {s.name for s in specs}
    for name in topology_topics(TopicNames(prefix)):
        kind = "dead_letters" if name.endswith(".dlq") else "stage_topics"
        if name not in listed and kind in templates:
            specs.append(topic(f"template {kind!r}", templates[kind], name))
    return specs


def load_profiles(path: Path = SPEC_PATH) -> dict[str, TopicProfile]:
    """The spec's `profiles` section. Raises ConfigError naming the offending profile/key."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read topic spec {path}: {err}") from None
    profiles = {}
    for name, body in (raw.get("profiles") or {}).items():
        body = body or {}
        unknown = set(body) - {"brokers", "replication_factor", "configs"}
        if unknown:
            raise ConfigError(f"topic spec: profile {name!r} has unknown key {sorted(unknown)[0]!r}")
        brokers, rf = body.get("brokers"), body.get("replication_factor")
        if not isinstance(brokers, int) or not isinstance(rf, int) or not 1 <= rf <= brokers:
            raise ConfigError(f"topic spec: profile {name!r} needs 1 ≤ 'replication_factor' ≤ 'brokers'")
        configs = {str(k): str(v) for k, v in (body.get("configs") or {}).items()}
        profiles[str(name)] = TopicProfile(str(name), brokers, rf, configs)
    return profiles


def choose_profile(profiles: Mapping[str, TopicProfile], brokers: int) -> TopicProfile | None:
    """The profile for a cluster of `brokers`: the largest `brokers` it reaches, None if none."""
    fitting = [p for p in profiles.values() if p.brokers <= brokers]
    return max(fitting, key=lambda p: p.brokers, default=None)


async def resolve_profile(
    admin: AIOKafkaAdminClient, profile: str, profiles: Mapping[str, TopicProfile]
) -> TopicProfile | None:
    """`profile` by name, none for NO_PROFILE, or (AUTO_PROFILE) the one the cluster's size picks."""
    if profile == NO_PROFILE:
        return None
    if profile == AUTO_PROFILE:
        cluster = await admin.describe_cluster()
        return choose_profile(profiles, len(cluster.get("brokers") or []))
    if profile not in profiles:
        known = ", ".join([AUTO_PROFILE, NO_PROFILE, *profiles])
        raise ConfigError(f"unknown topic profile {profile!r}; profiles are {known}")
    return profiles[profile]


KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1048588
KAFKA_DEFAULT_RETENTION_MS = 604800000


def topology_gaps(specs: list[TopicSpec], topics: TopicNames) -> list[str]:
    """What the spec lacks for the topology (`runtime.topology`), one line each; [] if none.

    Every topic the topology names must be declared, and each stage's dead-letter topic must
    hold what its sources hold (a dead letter carries the source record's bytes, and must
    outlive it: it is the only copy left to replay).
    """
    declared = {s.name: s for s in specs}
    gaps = [
        f"{topic}: not declared ({who})"
        for topic, who in topology_topics(topics).items()
        if topic not in declared
    ]
    for stage in TOPOLOGY:
        dlq = declared.get(stage.dlq(topics))
        if dlq is None:
            continue
        for source in (declared.get(t) for t in stage.sources(topics)):
            if source is None:
                continue
            if _max_bytes(dlq) < _max_bytes(source):
                gaps.append(f"{dlq.name}: max.message.bytes below its source {source.name}'s")
            if _retention_ms(dlq) < _retention_ms(source):
                gaps.append(f"{dlq.name}: retention.ms shorter than its source {source.name}'s")
    return gaps


def _max_bytes(spec: TopicSpec) -> int:
    return int(spec.configs.get("max.message.bytes", KAFKA_DEFAULT_MAX_MESSAGE_BYTES))


def _retention_ms(spec: TopicSpec) -> float:
    ms = int(spec.configs.get("retention.ms", KAFKA_DEFAULT_RETENTION_MS))
    return float("inf") if ms < 0 else ms


async def apply_spec(
    admin: AIOKafkaAdminClient,
    specs: list[TopicSpec],
    *,
    dry_run: bool = False,
    profile: str = AUTO_PROFILE,
    profiles: Mapping[str, TopicProfile] | None = None,
) -> ApplyReport:
    """Create or reconcile `specs` on the cluster behind `admin` (already started), under
    `profile` (default: the one the cluster's size picks from `profiles`, by default those
    of infra/topics.yaml)."""
    report = ApplyReport()
    # 0. The profile first: every topic's replication and configs follow the cluster's shape.
    chosen = await resolve_profile(admin, profile, load_profiles() if profiles is None else profiles)
    if chosen is not None:
        specs = chosen.apply(specs)
        report.profile = chosen.name
    described = await _describe(admin, [s.name for s in specs])
    existing = {name: count for name, (count, _rf) in described.items()}
    # 1. Create what is missing, in one request.
    missing = [s for s in specs if s.name not in existing]
    if missing and not dry_run:
        resp = await admin.create_topics(
            [NewTopic(s.name, s.partitions, s.replication_factor, topic_configs=s.configs) for s in missing]
        )
        for topic, code, *rest in resp.topic_errors:
            if code and for_code(code).__name__ != "TopicAlreadyExistsError":
                raise InfraError(
                    f"creating topic {topic} failed: {for_code(code).__name__} {rest[0] if rest else ''}"
                )
    report.created = [s.name for s in missing]
    present = [s for s in specs if s.name in existing]
    # 2. Partition counts can grow but never shrink (that would remap keys → break ordering).
    grow = {}
    for s in present:
        have = existing[s.name]
        if have < s.partitions:
            grow[s.name] = NewPartitions(total_count=s.partitions)
        elif have > s.partitions:
            report.drift.append(f"{s.name}: has {have} partitions, spec says {s.partitions} (cannot shrink)")
        if (rf := described[s.name][1]) < s.replication_factor:
            report.drift.append(
                f"{s.name}: replication factor {rf}, spec says {s.replication_factor} "
                "(reassign its partitions: kafka-reassign-partitions)"
            )
    if grow and not dry_run:
        await admin.create_partitions(grow)
    report.partitions_grown = sorted(grow)
    # 3. Align configs that differ from the spec.
    actual = await _topic_configs(admin, [s.name for s in present])
    to_alter = []
    for s in present:
        diff = {k: v for k, v in s.configs.items() if actual.get(s.name, {}).get(k) != v}
        if diff:
            to_alter.append(ConfigResource(ConfigResourceType.TOPIC, s.name, configs=s.configs))
            report.configs_altered.append(
                s.name + " (" + ", ".join(f"{k}={v}" for k, v in diff.items()) + ")"
            )
    if to_alter and not dry_run:
        await admin.alter_configs(to_alter)
        # On a cluster each broker learns the change from the metadata log a moment later; a
        # read that races it would see the old values (and the next apply would skip them).
        await _wait_for_configs(admin, [s for s in present if s.name in {c.name for c in to_alter}])
    changed = set(report.created) | set(grow) | {c.name for c in to_alter}
    report.unchanged = [s.name for s in specs if s.name not in changed]
    # 4. Wait until every partition has a leader, so producers can write right away.
    if not dry_run:
        await wait_for_leaders(admin, specs)
    return report


async def apply_topics(kafka: KafkaSettings, specs: list[TopicSpec] | None = None) -> ApplyReport:
    """`apply_spec` through an admin client of its own: `specs`, or (None) the whole topic
    spec under `kafka`'s topic prefix."""
    async with started_admin(kafka) as admin:
        return await apply_spec(admin, load_spec(prefix=kafka.topic_prefix) if specs is None else specs)


async def drop_topics(kafka: KafkaSettings) -> str | None:
    """Delete the topic spec's topics under `kafka`'s (single-use) prefix, so that runs on a
    fresh prefix each time (bench, chaos, eval) do not pile topics up on the broker: every
    topic's partitions cost the broker and every client's metadata work, busy or idle. Best
    effort, as cleanup must never fail a finished run: the error, or None."""
    try:
        async with started_admin(kafka) as admin:
            await admin.delete_topics([s.name for s in load_spec(prefix=kafka.topic_prefix)])
    except Exception as err:
        return f"{type(err).__name__}: {err}"
    return None


async def _describe(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, tuple[int, int]]:
    """(partition count, smallest replica count) of each existing topic in `names`."""
    described = await admin.describe_topics(names)
    return {
        t["topic"]: (len(t["partitions"]), min((len(p["replicas"]) for p in t["partitions"]), default=0))
        for t in described
        if t["error_code"] == 0
    }


async def _topic_configs(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, dict[str, str]]:
    if not names:
        return {}
    responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in names])
    out: dict[str, dict[str, str]] = {}
    for resp in responses:
        for resource in resp.resources:
            # (error_code, error_message, resource_type, resource_name, config_entries)
            name, entries = resource[3], resource[4]
            out[name] = {e[0]: e[1] for e in entries}
    return out


async def _wait_for_configs(
    admin: AIOKafkaAdminClient, specs: list[TopicSpec], timeout_s: float = 30
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        actual = await _topic_configs(admin, [s.name for s in specs])
        stale = [
            s.name for s in specs if any(actual.get(s.name, {}).get(k) != v for k, v in s.configs.items())
        ]
        if not stale:
            return
        if loop.time() > deadline:
            raise InfraError(f"topic configs not visible after {timeout_s:.0f} s: {stale}")
        await asyncio.sleep(0.1)  # polling the cluster's metadata: no event to await


async def wait_for_leaders(admin: AIOKafkaAdminClient, specs: list[TopicSpec], timeout_s: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    names = [s.name for s in specs]
    while True:
        topics = await admin.describe_topics(names)
        ready = {
            t["topic"]
            for t in topics
            if t["error_code"] == 0 and t["partitions"] and all(p["leader"] >= 0 for p in t["partitions"])
        }
        if ready >= set(names):
            return
        if loop.time() > deadline:
            raise InfraError(f"topics without leaders after {timeout_s:.0f} s: {sorted(set(names) - ready)}")
        await asyncio.sleep(0.1)


def summarize(report: ApplyReport) -> dict[str, Any]:
    return {k: v for k, v in report.__dict__.items() if v}
