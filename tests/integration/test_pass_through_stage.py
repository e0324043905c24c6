"""A stage added inside this test — a 6 dB attenuator between synthesize and encode — with
nothing edited outside it: its spec and its module are here, the topology is given as a value
(synthesize's output rewired to the new stage's source), and the same stages run in memory and
on a real broker. What they write must agree byte for byte, and the new stage's output must be
exactly its input at half amplitude (read by a plain consumer, not by the pipeline's code).

Kokoro only: it is deterministic (Piper draws its noise inside the graph)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pytest
from aiokafka import TopicPartition
from aiokafka.admin import NewTopic

from streamtts.processors.in_memory import InMemoryTopology, build_stages
from streamtts.producers.request_producer import RequestProducer
from streamtts.runtime.faust_stage import FaustStage, source_of
from streamtts.runtime.kafka import make_admin, make_consumer, topic_partitions
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.taken import Taken
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import GroupSpec, StageSpec, TopicRole, stage_spec
from streamtts.schemas import AudioChunk, ContractError, PcmChunk, TTSRequest, wire
from streamtts.schemas.headers import carried_headers, header_pairs

pytestmark = [pytest.mark.integration, pytest.mark.model]

RAW = cast(TopicRole, "pcm_raw")
"""The new topic between synthesize and the new stage (tts.pcm.raw)."""


class Attenuate(FaustStage):
    """The whole new stage: every PCM chunk at half amplitude (-6 dB), everything else kept."""

    name = "attenuate"

    def __init__(self, parts: StageParts, spec: StageSpec, group: GroupSpec) -> None:
        super().__init__(parts, spec=spec)
        self.out = self.outputs.role(spec.outputs[0])

    async def take(self, event: Any) -> Taken[PcmChunk]:
        try:
            return Taken(event, wire.decode(PcmChunk, event.message.value, event.message.headers))
        except ContractError as err:
            return Taken(event, error=err, now=True)

    async def handle(self, taken: Taken[PcmChunk]) -> str | None:
        chunk = taken.value
        if chunk is None:
            return await self.dead_letter(source_of(taken.event), taken.error or ValueError("unreadable"))
        half = (np.frombuffer(chunk.pcm, "<i2") // 2).astype("<i2").tobytes()
        record = wire.encode(chunk.model_copy(update={"pcm": half}), self.pipeline.delivery.wire_format)
        carried = carried_headers(taken.event.message.headers)
        await self.outputs.send(self.out, taken.event.message.key, record.value, [*carried, *record.headers])
        return "ok"


def _topology() -> tuple[StageSpec, ...]:
    """segment → synthesize (short pool) → attenuate → encode."""
    synthesize = dataclasses.replace(
        stage_spec("synthesize"), groups=(GroupSpec(("segments",), pool="short"),), outputs=(RAW,)
    )
    attenuate = StageSpec("attenuate", groups=(GroupSpec((RAW,)),), outputs=("pcm",), build=Attenuate)
    return (stage_spec("segment"), synthesize, attenuate, stage_spec("encode"))


Written = dict[str, list[tuple[int, int, bytes]]]
"""topic → (seq, part, payload) of one request, in order."""


def _row(
    audio: bool, value: bytes, headers: Sequence[tuple[str, bytes]]
) -> tuple[tuple[int, int, bytes], bool]:
    """A chunk record as (seq, part, payload), and whether it is its request's last."""
    if audio:
        a = wire.decode(AudioChunk, value, headers)
        return (a.seq, a.part, a.audio), a.last and a.last_part
    p = wire.decode(PcmChunk, value, headers)
    return (p.seq, p.part, p.pcm), p.last and p.last_part


def _request() -> TTSRequest:
    return TTSRequest.new(
        "您的包裹今天上午已经发出。预计明天中午之前送达。",
        language="zh",
        voice="jm_kumo",
        format="pcm",
        cache=False,
    )


async def _in_memory(
    renderer: Any, pipeline: PipelineSettings, topics: TopicNames, request: TTSRequest
) -> Written:
    async with InMemoryTopology(renderer, pipeline, topics, lanes=False, topology=_topology()) as memory:
        assert [s.name for s in memory.stages] == ["segment", "synthesize", "attenuate", "encode"]
        await memory.submit(request)
        await memory.run()
        return {
            topic: [
                _row(topic == topics.audio, r.value, header_pairs(r.headers))[0]
                for r in memory.records(topic, request.request_id)
            ]
            for topic in (topics.role(RAW), topics.pcm, topics.audio)
        }


async def _on_kafka(
    kafka: KafkaSettings, renderer: Any, pipeline: PipelineSettings, topics: TopicNames, request: TTSRequest
) -> Written:
    raw = topics.role(RAW)
    admin = make_admin(kafka)
    await admin.start()
    try:  # the new stage's topics, as `topics apply` would create them from its spec
        await admin.create_topics([NewTopic(raw, 3, 1), NewTopic(topics.dlq("attenuate"), 1, 1)])
    finally:
        await admin.close()
    parts = StageParts(
        kafka,
        pipeline,
        topics,
        Telemetry(),
        pieces={"model": lambda: renderer, "voices": lambda: renderer.synth.registry},
    )
    stages = build_stages(parts, _topology())
    consumer = make_consumer(kafka, group_id=None)
    await consumer.start()
    try:
        tps = [
            TopicPartition(t, p)
            for t in (raw, topics.pcm, topics.audio)
            for p in sorted(await topic_partitions(kafka, t))  # every partition: keys spread
        ]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)  # this test's topics: only its request is there
        for stage in reversed(stages):  # downstream first, as the worker starts them
            await stage.start()
        async with RequestProducer(kafka) as producer:
            await producer.submit(request)
        written: Written = {raw: [], topics.pcm: [], topics.audio: []}
        finished: set[str] = set()
        async with asyncio.timeout(180):
            while len(finished) < 3:
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    for r in records:
                        row, last = _row(tp.topic == topics.audio, r.value, header_pairs(r.headers))
                        written[tp.topic].append(row)
                        if last:
                            finished.add(tp.topic)
    finally:
        await consumer.stop()
        for stage in stages:  # upstream first
            await stage.stop()
    return {topic: sorted(chunks, key=lambda c: c[:2]) for topic, chunks in written.items()}


async def test_a_stage_added_in_a_test_runs_in_memory_and_on_kafka_alike(
    kafka_settings: KafkaSettings,
    topics: TopicNames,
    speech_renderer: Any,
    pipeline_settings: PipelineSettings,
) -> None:
    request = _request()
    memory = await _in_memory(speech_renderer, pipeline_settings, topics, request)
    raw, attenuated = memory[topics.role(RAW)], memory[topics.pcm]
    assert len(raw) >= 2, "two sentences: two spans at least"
    assert [c[:2] for c in attenuated] == [c[:2] for c in raw], "one attenuated chunk per chunk"
    for (_, _, before), (_, _, after) in zip(raw, attenuated, strict=True):
        loud, quiet = np.frombuffer(before, "<i2"), np.frombuffer(after, "<i2")
        assert np.abs(loud).max() > 1000, "real speech, not silence"
        assert np.array_equal(quiet, loud // 2), "exactly half amplitude"
    assert [c[:2] for c in memory[topics.audio]] == [c[:2] for c in raw], "encode read the new stage's output"

    on_kafka = await _on_kafka(kafka_settings, speech_renderer, pipeline_settings, topics, request)
    for topic in (topics.role(RAW), topics.pcm, topics.audio):
        assert on_kafka[topic] == memory[topic], f"{topic}: the broker's records differ from memory's"
