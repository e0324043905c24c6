"""Logical topic roles → concrete names (with the deployment's prefix). One source of names."""

from __future__ import annotations

import re
from dataclasses import dataclass

from streamtts.runtime.topology import TOPIC_ROLES, TopicRole, stage_spec
from streamtts.schemas import Delivery
from streamtts.schemas.names import STAGES
from streamtts.schemas.release import BASE_RELEASE, RELEASE_PATTERN

__all__ = ["STAGES", "TopicNames"]

LANE_POOLS: dict[str, str] = {"segments": "short", "segments_long": "long"}
"""The roles a release has its own lane of, and the synthesize pool each feeds."""


@dataclass(frozen=True)
class TopicNames:
    prefix: str = ""

    def _n(self, name: str) -> str:
        return f"{self.prefix}{name}"

    @property
    def requests(self) -> str:
        return self._n("tts.requests")

    @property
    def segments(self) -> str:
        return self._n("tts.segments")

    @property
    def segments_long(self) -> str:
        """Segments of long/batch requests, read by the long-text synthesize pool."""
        return self._n("tts.segments.long")

    @property
    def pcm(self) -> str:
        return self._n("tts.pcm")

    @property
    def audio(self) -> str:
        return self._n("tts.audio")

    @property
    def results(self) -> str:
        return self._n("tts.results")

    @property
    def control(self) -> str:
        """Cancels (barge-in), keyed by request_id; every worker reads all of it."""
        return self._n("tts.control")

    @property
    def load(self) -> str:
        """Synthesize workers' load reports (compacted), keyed by worker; read by admission."""
        return self._n("tts.load")

    @property
    def lexicons(self) -> str:
        """Tenant lexicons (compacted), keyed by tenant; every segment stage reads all of it."""
        return self._n("tts.lexicons")

    @property
    def config(self) -> str:
        """Live configuration (compacted): the release routing rule under key "release"."""
        return self._n("tts.config")

    def release_segments(self, release: str, pool: str = "short") -> str:
        """The segments topic of a release's lane for a pool. The base release keeps today's
        names; another release `NAME` reads tts.release.NAME.segments[.long]."""
        if release == BASE_RELEASE:
            return self.segments_long if pool == "long" else self.segments
        return self._n(f"tts.release.{release}.segments{'.long' if pool == 'long' else ''}")

    @property
    def replay_ledger(self) -> str:
        return self._n("tts.replay.ledger")

    @property
    def audit(self) -> str:
        """Audit events (gateway actions, replay runs), keyed by tenant; append-only."""
        return self._n("tts.audit")

    def chunk_topics(self, delivery: Delivery) -> list[str]:
        """Where a request's audio chunks go: the default audio topic (if the request wants
        chunks) and its reply topic, deduplicated."""
        out = [self.audio] if delivery.chunks else []
        if delivery.reply_topic and delivery.reply_topic not in out:
            out.append(delivery.reply_topic)
        return out

    def role(self, role: TopicRole) -> str:
        """The topic of a topology role (see `runtime.topology`)."""
        if role not in TOPIC_ROLES:
            raise ValueError(f"unknown topic role {role!r}")
        name: str = getattr(self, role)
        return name

    def lane(self, role: TopicRole, release: str) -> str:
        """`role`'s topic as `release` reads it: its lane for a candidate release, the role's
        own topic for the base release."""
        if role not in LANE_POOLS:
            raise ValueError(f"topic role {role!r} has no release lanes")
        return self.release_segments(release, LANE_POOLS[role])

    def sources(self, stage: str) -> list[str]:
        """The topics a stage consumes (the base release's): where its dead letters may be
        re-driven to. Declared in `runtime.topology`."""
        return stage_spec(stage).sources(self)

    def is_source(self, stage: str, topic: str) -> bool:
        """Whether `stage` reads `topic`: its own topics, and for a stage with release lanes
        any release's lane (a candidate's dead letters re-drive to that candidate's lane)."""
        spec = stage_spec(stage)
        if topic in spec.sources(self):
            return True
        release = self.lane_release(topic)
        return spec.release_lanes and release is not None and topic in spec.sources(self, release)

    def lane_release(self, topic: str) -> str | None:
        """The release whose lane `topic` is (tts.release.NAME.segments[.long]), else None."""
        lanes = self._n("tts.release.")
        if not topic.startswith(lanes):
            return None
        release = topic[len(lanes) :].partition(".")[0]
        if re.fullmatch(RELEASE_PATTERN, release) is None:
            return None
        is_lane = topic in (self.release_segments(release, pool) for pool in LANE_POOLS.values())
        return release if is_lane else None

    def dlq(self, stage: str) -> str:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")
        return self._n(f"tts.{stage}.dlq")
