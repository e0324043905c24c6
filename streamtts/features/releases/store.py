"""Writing the release routing rule: the state changes (pure) and the writes to `tts.config`.

States: stable (no candidate) → canary (a candidate gets a share) → promoted (the candidate is
the new stable release) or rolled_back (everything on stable again). Every change rewrites
the whole record with the next version, so the topic's newest record is the rule.
"""

from __future__ import annotations

from datetime import UTC, datetime

from streamtts.errors import ConfigError
from streamtts.runtime.kafka import make_producer
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas import GuardLimits, ReleaseConfig, wire
from streamtts.schemas.release import RELEASE_KEY


def with_canary(
    current: ReleaseConfig,
    candidate: str,
    *,
    percent: float,
    tenants: list[str] | None = None,
    header: bool = False,
    limits: GuardLimits | None = None,
    by: str = "cli",
) -> ReleaseConfig:
    """`current` with `candidate` receiving `percent` % (and `tenants`, and header requests)."""
    if candidate == current.stable:
        raise ConfigError(f"{candidate!r} is already the stable release")
    return ReleaseConfig(
        version=current.version + 1,
        stable=current.stable,
        candidate=candidate,
        state="canary",
        percent=percent,
        tenants=list(tenants or []),
        header=header,
        limits=limits or current.limits,
        reason=f"canary {candidate} at {percent:g} %",
        updated_by=by,
        updated_at=datetime.now(UTC),
    )


def promoted(current: ReleaseConfig, *, by: str = "cli", reason: str | None = None) -> ReleaseConfig:
    """The candidate becomes the stable release: every new request goes to its lane; the old
    stable lane drains what it already holds."""
    if current.state != "canary" or current.candidate is None:
        raise ConfigError(f"no candidate to promote (state is {current.state})")
    return ReleaseConfig(
        version=current.version + 1,
        stable=current.candidate,
        state="promoted",
        limits=current.limits,
        reason=reason or f"promoted {current.candidate} (was {current.stable})",
        updated_by=by,
        updated_at=datetime.now(UTC),
    )


def rolled_back(current: ReleaseConfig, *, reason: str, by: str = "cli") -> ReleaseConfig:
    """No new request goes to the candidate; what it was given finishes on its lane."""
    if current.state != "canary" or current.candidate is None:
        raise ConfigError(f"no candidate to roll back (state is {current.state})")
    return ReleaseConfig(
        version=current.version + 1,
        stable=current.stable,
        candidate=current.candidate,  # kept: status shows what was rolled back, and why
        state="rolled_back",
        limits=current.limits,
        reason=reason,
        updated_by=by,
        updated_at=datetime.now(UTC),
    )


async def write_release(kafka: KafkaSettings, topic: str, rule: ReleaseConfig) -> None:
    """Publish `rule` (acks=all, idempotent) under the rule's key."""
    producer = make_producer(kafka)
    await producer.start()
    try:
        record = wire.encode(rule, source=wire.SOURCE_PREFIX + "/releases")
        await producer.send_and_wait(topic, record.value, key=RELEASE_KEY, headers=record.headers)
    finally:
        await producer.stop()
