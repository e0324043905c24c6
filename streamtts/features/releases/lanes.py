"""The topics of a release's lane, created by `streamtts release set` with the spec of the
base release's segments topics (same partitions, so a lane scales out the same way; same
retention), from infra/topics.yaml."""

from __future__ import annotations

from dataclasses import replace

from streamtts.infra.topics import apply_topics, load_spec
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas.release import BASE_RELEASE


async def create_release_lanes(kafka: KafkaSettings, release: str) -> list[str]:
    """Create (or reconcile) `release`'s segments topics with the spec of the base ones, so a
    lane has the same partitions (scale-out) and retention. Returns the lane's topic names."""
    if release == BASE_RELEASE:
        return []
    topics = TopicNames(kafka.topic_prefix)
    base = {s.name: s for s in load_spec(prefix=kafka.topic_prefix)}
    specs = [
        replace(
            base[topics.release_segments(BASE_RELEASE, pool)], name=topics.release_segments(release, pool)
        )
        for pool in ("short", "long")
    ]
    await apply_topics(kafka, specs)
    return [s.name for s in specs]
