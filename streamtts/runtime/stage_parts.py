"""What building a stage may use: the settings, the topic names, the telemetry, and the
process's shared pieces by name. A worker and the in-memory topology each hand one to every
stage's `build` function (`StageSpec.build`), so a stage is built one way wherever it runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, S3Settings
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames

PIECES = ("model", "voices", "lanes", "release_profile", "cancels", "lexicons", "releases", "object_store")
"""The pieces a process may share with its stages:
model: the loaded renderer; voices: resolves voice names (the model's registry, or one that
loads nothing); lanes: the inference lanes synthesize stages share; release_profile: the
release the process serves; cancels, lexicons, releases: the side services of those names;
object_store: where the sink stores files instead of `s3` (the in-memory topology's store)."""


@dataclass(frozen=True)
class StageParts:
    kafka: KafkaSettings
    pipeline: PipelineSettings
    topics: TopicNames
    telemetry: Telemetry
    s3: S3Settings | None = None
    """Object storage, for a stage that stores (the sink); None in memory."""
    namespace: str = ""
    """The sink's key namespace in object storage."""
    pieces: Mapping[str, Callable[[], Any]] = field(default_factory=dict)
    """Each shared piece (`PIECES`) as a function giving it: made when a stage asks, so a
    process builds nothing its stages do not use."""

    @classmethod
    def of(
        cls,
        kafka: KafkaSettings | None = None,
        pipeline: PipelineSettings | None = None,
        *,
        topics: TopicNames | None = None,
        telemetry: Telemetry | None = None,
    ) -> StageParts:
        """Parts with the defaults for what is not given (tests and tools build one stage)."""
        kafka = kafka or KafkaSettings()
        topics = topics or TopicNames(kafka.topic_prefix)
        return cls(kafka, pipeline or PipelineSettings(), topics, telemetry or Telemetry())

    def piece(self, name: str) -> Any:
        """The piece `name`, or None where the process has none."""
        if name not in PIECES:
            raise ValueError(f"unknown stage piece {name!r}; pieces are {', '.join(PIECES)}")
        give = self.pieces.get(name)
        return give() if give is not None else None
