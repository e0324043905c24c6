"""Logical topic roles → concrete names (with the deployment's prefix). One source of names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import overload

from streamtts.runtime.topology import STAGES, TOPIC_ROLES, TopicRole, stage_spec
from streamtts.schemas import Delivery
from streamtts.schemas.names import STAGE_NAME
from streamtts.schemas.release import BASE_RELEASE, RELEASE_PATTERN

__all__ = ["STAGES", "TopicNames"]

_NEW_ROLE = STAGE_NAME
"""A role outside `TOPIC_ROLES`: lower-case words joined by "_" (a topic name's parts)."""

LANE_POOLS: dict[str, str] = {"segments": "short", "segments_long": "long"}
"""The roles a release has its own lane of, and the synthesize pool each feeds."""


class _Topic:
    """A `TopicNames` attribute: the topic `name` under the deployment's prefix."""

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, names: None, owner: type[TopicNames]) -> _Topic: ...

    @overload
    def __get__(self, names: TopicNames, owner: type[TopicNames]) -> str: ...

    def __get__(self, names: TopicNames | None, owner: type[TopicNames]) -> _Topic | str:
        return self if names is None else names._n(self.name)


@dataclass(frozen=True)
class TopicNames:
    prefix: str = ""

    requests = _Topic("tts.requests")
    utterances = _Topic("tts.utterances")
    """Open streamed utterances' state (compacted), keyed by request id: the segment
    stage's changelog, read back by a partition's next owner."""
    segments = _Topic("tts.segments")
    segments_long = _Topic("tts.segments.long")
    """Segments of long/batch requests, read by the long-text synthesize pool."""
    pcm = _Topic("tts.pcm")
    audio = _Topic("tts.audio")
    file_parts = _Topic("tts.file.parts")
    """Each chunk's part of its request's stored file (encode → the completion sink)."""
    results = _Topic("tts.results")
    control = _Topic("tts.control")
    """Cancels (barge-in), keyed by request_id; every worker reads all of it."""
    load = _Topic("tts.load")
    """Synthesize workers' load reports (compacted), keyed by worker; read by admission."""
    lexicons = _Topic("tts.lexicons")
    """Tenant lexicons (compacted), keyed by tenant; every segment stage reads all of it."""
    config = _Topic("tts.config")
    """Live configuration (compacted): the release routing rule under key "release"."""
    replay_ledger = _Topic("tts.replay.ledger")
    audit = _Topic("tts.audit")
    """Audit events (gateway actions, replay runs), keyed by tenant; append-only."""

    def _n(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def release_segments(self, release: str, pool: str = "short") -> str:
        """The segments topic of a release's lane for a pool. The base release keeps today's
        names; another release `NAME` reads tts.release.NAME.segments[.long]."""
        if release == BASE_RELEASE:
            return self.segments_long if pool == "long" else self.segments
        return self._n(f"tts.release.{release}.segments{'.long' if pool == 'long' else ''}")

    def chunk_topics(self, delivery: Delivery) -> list[str]:
        """Where a request's audio chunks go: the default audio topic (if the request wants
        chunks) and its reply topic, deduplicated."""
        out = [self.audio] if delivery.chunks else []
        if delivery.reply_topic and delivery.reply_topic not in out:
            out.append(delivery.reply_topic)
        return out

    def role(self, role: TopicRole) -> str:
        """The topic of a topology role (see `runtime.topology`). A role the pipeline does not
        have (a stage added to a topology given as a value) is named by the same rule as
        the others: "pcm_raw" is tts.pcm.raw."""
        if role in TOPIC_ROLES and isinstance(vars(TopicNames).get(role), _Topic):
            name: str = getattr(self, role)
            return name
        if not _NEW_ROLE.fullmatch(role):
            raise ValueError(f"unknown topic role {role!r}")
        name = self._n("tts." + role.replace("_", "."))
        # A new role names a new topic: never one the pipeline has (the ledger, the audit
        # trail), a dead-letter topic or a release's lane, which a spec could then claim.
        taken = {getattr(self, attr) for attr, value in vars(TopicNames).items() if isinstance(value, _Topic)}
        if name in taken or name.endswith(".dlq") or self.lane_release(name) is not None:
            raise ValueError(f"topic role {role!r} would name {name!r}, which the pipeline has already")
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
        """A stage's dead letters: tts.<stage>.dlq (a stage added to a topology given as a
        value, too: a lower-case name)."""
        if stage not in STAGES and not _NEW_ROLE.fullmatch(stage):
            raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")
        return self._n(f"tts.{stage}.dlq")
