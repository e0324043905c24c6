"""The one place a stage's class is bound to its spec: how a worker builds one consumer group's
service of each stage in `TOPOLOGY`. Here, not in the topology: the runtime layer may not
import the stages it wires."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from streamtts.runtime.pipeline_settings import voice_map
from streamtts.runtime.stage import Stage
from streamtts.runtime.topology import GroupSpec

if TYPE_CHECKING:
    from streamtts.worker import Worker


def _segment(worker: Worker, group: GroupSpec) -> Stage:
    from streamtts.processors.segment.stage import SegmentStage
    from streamtts.processors.synthesize.registry import VoiceRegistry

    # Reuse the synthesizer's registry when this process has one (voice packs load once);
    # otherwise one that only resolves names (engines load lazily, never in this stage).
    renderer = worker.renderer
    voices = renderer.synth.registry if renderer is not None else VoiceRegistry(threads=1)
    return SegmentStage(
        worker.settings.kafka,
        worker.pipeline,
        worker.topics,
        voices=voices,
        telemetry=worker.telemetry,
        lexicons=worker.lexicons,
        releases=worker.releases,
    )


def _synthesize(worker: Worker, group: GroupSpec) -> Stage:
    from streamtts.features.releases.profile import ReleaseProfile
    from streamtts.processors.synthesize.stage import SynthesizeStage

    pipe = worker.pipeline
    assert worker.renderer is not None, "the model is loaded before the synthesize stage starts"
    assert group.pool is not None, "synthesize groups serve a pool"
    return SynthesizeStage(
        worker.settings.kafka,
        pipe,
        worker.renderer,
        worker.topics,
        pool=group.pool,
        telemetry=worker.telemetry,
        cancels=worker.cancels,
        profile=ReleaseProfile(pipe.release.name, voice_map(pipe.release.voices)),
        lanes=worker.lanes,
    )


def _encode(worker: Worker, group: GroupSpec) -> Stage:
    from streamtts.processors.encode.stage import EncodeStage

    return EncodeStage(worker.settings.kafka, worker.pipeline, worker.topics, telemetry=worker.telemetry)


def _sink(worker: Worker, group: GroupSpec) -> Stage:
    from streamtts.sinks.completion_sink import CompletionSink

    return CompletionSink(
        worker.settings.kafka,
        worker.settings.s3,
        worker.pipeline,
        worker.topics,
        namespace=worker._sink_namespace,
        telemetry=worker.telemetry,
    )


STAGE_FACTORIES: dict[str, Callable[[Worker, GroupSpec], Stage]] = {
    "segment": _segment,
    "synthesize": _synthesize,
    "encode": _encode,
    "sink": _sink,
}
"""Builds one consumer group's service of each stage in `TOPOLOGY` (complete: a test checks)."""


async def _warm_segment() -> None:
    from streamtts.processors.segment.stage import warm_segmenting

    await warm_segmenting()


STAGE_WARMERS: dict[str, Callable[[], Awaitable[None]]] = {"segment": _warm_segment}
"""What a stage loads for the whole process before its first record, run before any stage of
the worker starts: a load that holds the GIL then starves no started stage (the segment
stage's language models did, ~5 s, while the sink and encode in its process had joined)."""
