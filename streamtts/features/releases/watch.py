"""The release routing rule as a process sees it: one reader of `tts.config`, followed live.

The topic is compacted and small, so it is read whole — no consumer group, from the
beginning — and then followed; the newest valid record under key "release" is the rule. A
change reaches `current` within one poll (`poll_ms`), which bounds how fast a rollback takes
effect for the next request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime

from aiokafka import ConsumerRecord

from streamtts.features.releases.lane_health import LaneHealth
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topic_follower import TopicFollower
from streamtts.schemas import CanaryReport, ContractError, ReleaseConfig
from streamtts.schemas.release import CANARY_KEY_PREFIX, RELEASE_KEY

MAX_IN_FLIGHT = 10_000

log = logging.getLogger("streamtts.releases")


class ReleaseWatch(TopicFollower):
    """The current `ReleaseConfig` (`ReleaseConfig.initial()` until a rule is written)."""

    what = "config"

    def __init__(
        self,
        kafka: KafkaSettings,
        topic: str,
        *,
        poll_ms: int = 200,
        on_change: Callable[[ReleaseConfig], None] | None = None,
    ) -> None:
        super().__init__(kafka, topic, poll_ms=poll_ms, log=log, name="release-watch")
        self.on_change = on_change
        self.current = ReleaseConfig.initial()
        self.written = False
        """Whether any rule was read (False: nobody ever configured releases)."""
        self.canaries: dict[bytes, CanaryReport] = {}
        """Each synthesize worker's latest canary state (key canary/<release>/<worker>)."""
        self.in_flight: OrderedDict[str, tuple[str, float]] = OrderedDict()
        """Requests this process routed off the base lane and not yet seen completed:
        request id → (release, monotonic time routed); oldest first, bounded. The guard
        drops each at its result and treats an old one as a stalled candidate."""
        self.lanes = LaneHealth(kafka)
        """Whether a release's lane has live consumers (cached): asked by the segment stage
        before it routes to a candidate, and by the guard for stranded requests."""

    def _caught_up(self) -> None:
        super()._caught_up()
        self._applied(replayed=True)

    async def _take_batch(self, records: list[ConsumerRecord]) -> None:
        changed = False
        for record in records:
            changed |= self._take(record.key, record.value)
        if changed and self.caught_up.is_set():
            self._applied(replayed=False)

    def routed(self, request_id: str, release: str) -> None:
        """The segment stage routed a request to `release` (only candidates are tracked)."""
        if release == self.current.stable:
            return
        self.in_flight[request_id] = (release, time.monotonic())
        while len(self.in_flight) > MAX_IN_FLIGHT:
            self.in_flight.popitem(last=False)

    async def stop(self) -> None:
        await super().stop()
        await self.lanes.close()

    def _take(self, key: bytes | None, value: bytes | None) -> bool:
        if key is not None and key.startswith(CANARY_KEY_PREFIX):
            self._take_canary(key, value)
            return False
        if key != RELEASE_KEY or value is None:
            return False
        try:
            rule = ReleaseConfig.from_bytes(value)
        except ContractError as err:  # a bad write must not take routing down: keep the last rule
            log_event(log, "release_rule_invalid", logging.WARNING, error=str(err)[:200])
            return False
        if self.written and rule.version <= self.current.version:
            # A late writer of an older version (two guards rolling back the same rule, one
            # behind an operator's newer `release set`) must not undo what came after it.
            log_event(
                log, "release_rule_stale", logging.WARNING, version=rule.version, current=self.current.version
            )
            return False
        self.current = rule
        self.written = True
        return True

    def _take_canary(self, key: bytes, value: bytes | None) -> None:
        if value is None:  # a tombstone: that worker is gone
            self.canaries.pop(key, None)
            return
        try:
            self.canaries[key] = CanaryReport.from_bytes(value)
        except ContractError as err:
            log_event(log, "canary_report_invalid", logging.WARNING, error=str(err)[:200])

    def _applied(self, *, replayed: bool) -> None:
        rule = self.current
        if self.written:
            log_event(
                log,
                "release_rule_applied",
                version=rule.version,
                state=rule.state,
                stable=rule.stable,
                candidate=rule.candidate,
                percent=rule.percent,
                replayed=replayed,
                reason=rule.reason,
                # Written → in force here: what "rollback takes effect within 2 s" measures.
                lag_ms=round((datetime.now(UTC) - rule.updated_at).total_seconds() * 1000, 1),
            )
        if self.on_change is not None:
            self.on_change(rule)


async def read_release(
    kafka: KafkaSettings, topic: str, timeout_s: float = 15.0
) -> tuple[ReleaseConfig, bool]:
    """The rule in force now and whether one was ever written (a one-shot read for tools)."""
    watch = ReleaseWatch(kafka, topic)
    try:
        await watch.start()
        await asyncio.wait_for(watch.caught_up.wait(), timeout_s)
        return watch.current, watch.written
    finally:
        await watch.stop()
