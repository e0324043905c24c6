"""Logical topic roles → concrete names (with the deployment's prefix). One source of names."""

from __future__ import annotations

import re
from dataclasses import dataclass

from streamtts.schemas import Delivery
from streamtts.schemas.names import STAGES
from streamtts.schemas.release import BASE_RELEASE, RELEASE_PATTERN


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

    def sources(self, stage: str) -> list[str]:
        """The topics a stage consumes: where its dead letters may be re-driven to."""
        return {
            "segment": [self.requests],
            "synthesize": [self.segments, self.segments_long],
            "encode": [self.pcm],
            "sink": [self.pcm],
        }[stage]

    def is_source(self, stage: str, topic: str) -> bool:
        """Whether `stage` reads `topic`: its own topics, and for synthesize any release's lane
        (a candidate's dead letters re-drive to that candidate's lane)."""
        if topic in self.sources(stage):
            return True
        lane = self._n("tts.release.")
        if stage != "synthesize" or not topic.startswith(lane):
            return False
        name, _, rest = topic[len(lane) :].partition(".")
        return rest in ("segments", "segments.long") and re.fullmatch(RELEASE_PATTERN, name) is not None

    def dlq(self, stage: str) -> str:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")
        return self._n(f"tts.{stage}.dlq")
