"""Whether a release's lane has a live consumer, from Kafka's own view: the members of the
lane's synthesize consumer groups (DescribeGroups) and the records none of them consumed yet
(end offset − committed offset).

A crashed candidate leaves its group when its session times out (`session_timeout_s`, 10 s);
from then on the group has no members and whatever its lane holds is stranded. The segment
stage asks `live()` before it routes a request to a candidate; the guard asks `states()` to
notice stranded requests. Answers are cached for `ttl_s` (one admin round trip per lane every
couple of seconds, never one per request).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import OffsetAndMetadata

from streamtts.runtime.faust_app import group_id
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import describe_partitions, make_admin, make_consumer
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import stage_spec
from streamtts.schemas.names import POOLS

log = logging.getLogger("streamtts.releases")

LIVE_STATES = ("Stable", "PreparingRebalance", "CompletingRebalance")
"""Group states with members (Empty and Dead have none)."""


def lane_group(kafka: KafkaSettings, release: str, pool: str) -> str:
    """The consumer group of `release`'s synthesize workers for `pool`."""
    spec = stage_spec("synthesize")
    return group_id(kafka, spec.group_role(spec.group_for(pool), release))


@dataclass(frozen=True)
class LaneState:
    """One pool of a release's lane as Kafka sees it."""

    release: str
    pool: str
    group: str
    members: int
    """Live members of the lane's consumer group."""
    unconsumed: int
    """Records on the lane's topic past the group's committed offsets."""

    @property
    def stranded(self) -> bool:
        """Records wait and nobody will read them."""
        return self.members == 0 and self.unconsumed > 0


class LaneHealth:
    """Cached answers about release lanes; one admin client, started on first use."""

    def __init__(
        self,
        kafka: KafkaSettings,
        topics: TopicNames | None = None,
        *,
        ttl_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kafka = kafka
        self.topics = topics or TopicNames(kafka.topic_prefix)
        self.ttl_s = ttl_s
        self._clock = clock
        self._admin: AIOKafkaAdminClient | None = None
        self._lock = asyncio.Lock()
        self._members: dict[str, tuple[float, int]] = {}
        self._states: dict[str, tuple[float, list[LaneState]]] = {}
        self.refused: dict[str, float] = {}
        """release → when `live()` first answered False for it (the guard reads this: the
        segment stage kept requests off a lane with no consumer)."""

    async def live(self, release: str, pool: str) -> bool:
        """Whether `release`'s `pool` lane has a member. An unknown answer (Kafka trouble)
        is True: a failed check must not move traffic."""
        group = lane_group(self.kafka, release, pool)
        now = self._clock()
        cached = self._members.get(group)
        if cached is None or now - cached[0] >= self.ttl_s:
            try:
                async with self._lock:
                    counts = await self._count_members([group])
            except Exception as err:  # routing goes on with the last answer
                log_event(log, "lane_check_failed", logging.WARNING, group=group, error=str(err)[:200])
                return cached is None or cached[1] > 0
            cached = self._members[group] = (now, counts[group])
        if cached[1] > 0:
            return True
        self.refused.setdefault(release, now)
        return False

    async def states(self, release: str) -> list[LaneState]:
        """Both pools of `release`'s lane: members and records not consumed (cached)."""
        now = self._clock()
        cached = self._states.get(release)
        if cached is not None and now - cached[0] < self.ttl_s:
            return cached[1]
        async with self._lock:
            found = await self._measure(release)
        self._states[release] = (now, found)
        for state in found:
            self._members[state.group] = (now, state.members)
        return found

    def forget(self, release: str) -> None:
        """Drop what is known of `release` (a new rule: judge its lanes afresh)."""
        self.refused.pop(release, None)
        self._states.pop(release, None)
        for pool in POOLS:
            self._members.pop(lane_group(self.kafka, release, pool), None)

    async def _measure(self, release: str) -> list[LaneState]:
        admin = await self._admin_client()
        groups = {pool: lane_group(self.kafka, release, pool) for pool in POOLS}
        counts = await self._count_members(list(groups.values()))
        lanes = {pool: self.topics.release_segments(release, pool) for pool in POOLS}
        partitions = await describe_partitions(admin, list(lanes.values()))
        tps = [TopicPartition(t, p) for t, ps in partitions.items() for p in sorted(ps)]
        begins, ends = await _bounds(self.kafka, tps)
        out: list[LaneState] = []
        for pool, group in groups.items():
            committed = await admin.list_consumer_group_offsets(group)
            waiting = 0
            for tp in (tp for tp in tps if tp.topic == lanes[pool]):
                waiting += max(0, ends[tp] - resume_at(committed, tp, begins[tp]))
            out.append(LaneState(release, pool, group, counts[group], waiting))
        return out

    async def _count_members(self, groups: list[str]) -> dict[str, int]:
        admin = await self._admin_client()
        counts = dict.fromkeys(groups, 0)
        for group in groups:
            # One group per request: aiokafka 0.14 mis-decodes the second group of a response.
            for response in await admin.describe_consumer_groups([group]):
                for described in response.groups:
                    error_code, name, state, members = described[0], described[1], described[2], described[5]
                    if error_code == 0 and name == group and state in LIVE_STATES:
                        counts[group] = len(members)
        return counts

    async def _admin_client(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            admin = make_admin(self.kafka)
            await admin.start()
            self._admin = admin
        return self._admin

    async def close(self) -> None:
        if self._admin is not None:
            await self._admin.close()
            self._admin = None


def resume_at(committed: Mapping[TopicPartition, OffsetAndMetadata], tp: TopicPartition, begin: int) -> int:
    """Where a group resumes reading `tp`: its committed offset (none: 0), never before the
    partition's first retained record `begin`."""
    meta = committed.get(tp)
    return max(meta.offset if meta is not None and meta.offset >= 0 else 0, begin)


async def _bounds(
    kafka: KafkaSettings, tps: list[TopicPartition]
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Beginning and end offsets of `tps` (a consumer without a group)."""
    if not tps:
        return {}, {}
    consumer = make_consumer(kafka, group_id=None)
    await consumer.start()
    try:
        return await consumer.beginning_offsets(tps), await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
