"""The same topology in memory: the real stages' handlers, the same records and headers, no broker.

Like Kafka Streams' `TopologyTestDriver`: each topic is a list in memory; a record written by a
stage (through its `StageOutputs`, so only what its spec declares) is handed, in order, to the
`handle` of every stage whose spec reads that topic. One process, one partition per topic, one
record at a time: a request's records keep their order as on one Kafka partition.

It runs segment, both synthesize pools and encode, and the sink where the caller gives it a
store for its files (`object_store`, e.g. `sinks.memory_store.MemoryObjectStore`: this room
cannot import the sinks'): the file it stores and the result it writes on `tts.results` are
the pipeline's. Without one, it ends at the chunks on `tts.pcm`, `tts.audio` and
`tts.file.parts`, which are what a request's file is made of.

Kept out on purpose: a request naming a reply topic (the segment stage asks the brokers whether
it exists) and candidate releases (no routing rule is followed in memory).
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol, TypeVar

from streamtts.errors import RecordError
from streamtts.features.lexicons.book import LexiconBook
from streamtts.processors.synthesize.renderer import SegmentRenderer
from streamtts.processors.synthesize.speech_stack import build_lanes
from streamtts.runtime.loop_record import LoopEvent, LoopRecord
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.stage import aimed_elsewhere
from streamtts.runtime.stage_loop import StageLoop
from streamtts.runtime.stage_outputs import DELIVERED, Delivered
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import TOPOLOGY, StageSpec
from streamtts.schemas import CompletionResult, FilePart, PcmChunk, TextDelta, TTSRequest, wire
from streamtts.schemas.dead_letter import DeadLetter
from streamtts.schemas.headers import header_pairs

R = TypeVar("R")

MAX_RECORDS = 100_000
"""Records one `run` may pass before it is called runaway (a stage writing its own source)."""


class FilesInMemory(Protocol):
    """The sink's store in memory as the topology reads it back (`MemoryObjectStore`)."""

    def get(self, bucket: str, key: str) -> bytes: ...

    def clear(self) -> None: ...


@dataclass(frozen=True)
class StoredRender:
    """A request through the whole topology: its result as the sink wrote it on tts.results,
    and the files it stored (key → bytes)."""

    result: CompletionResult
    files: dict[str, bytes]

    @property
    def audio(self) -> bytes:
        assert self.result.storage is not None, "a completed result names its file"
        return self.files[self.result.storage.key]


def _given(value: object) -> object:
    return value


def runs_in_memory(spec: StageSpec, parts: StageParts) -> bool:
    """Whether `parts` give every piece the stage needs in memory (`StageSpec.in_memory_needs`)."""
    return all(parts.pieces.get(need) is not None for need in spec.in_memory_needs)


def build_stages(parts: StageParts, topology: Sequence[StageSpec]) -> list[StageLoop]:
    """Every stage of `topology` that runs in memory with `parts` (`runs_in_memory`), in
    data-path order, one per consumer group (synthesize: one per pool), each built by its
    spec's `build` and reading and writing what its spec there says."""
    stages: list[StageLoop] = []
    for spec in topology:
        if not runs_in_memory(spec, parts):
            continue
        build = spec.factory()
        for group in spec.groups:
            stage = build(parts, spec, group)
            if not isinstance(stage, StageLoop):
                raise TypeError(f"stage {spec.name!r} is not a StageLoop: it cannot run in memory")
            stages.append(stage)
    return stages


class InMemoryTopology:
    """Segment → synthesize (short and long pools) → encode, run in this process (or any
    topology of faust stages given as a value: `topology`, each stage built by its spec's `build`).

    Use `async with`: stages are built (not started: no consumer, no producer, no broker) and
    their thread pools shut down at exit."""

    def __init__(
        self,
        renderer: SegmentRenderer,
        pipeline: PipelineSettings | None = None,
        topics: TopicNames | None = None,
        *,
        lexicons: LexiconBook | None = None,
        telemetry: Telemetry | None = None,
        lanes: bool = True,
        on_record: Callable[[LoopRecord], None] | None = None,
        log: logging.Logger | None = None,
        topology: Sequence[StageSpec] = TOPOLOGY,
        object_store: FilesInMemory | None = None,
    ) -> None:
        """renderer: the model (its registry also resolves voice names for segment);
        lexicons: tenant lexicons segment applies (fill it with `LexiconBook.take`);
        lanes: inference lanes as the settings build them for a worker (where a bulk span is
        cut into pieces depends on them); False: the synthesize stage's own executor;
        on_record: told of every record as it is written (e.g. the first PCM: first audio);
        log: where every stage logs instead of its own logger (the canary's: its warnings
        only, so its renders are not read as traffic);
        topology: the stages to run (see `build_stages`);
        object_store: where the sink stores files (`sinks.memory_store.MemoryObjectStore`);
        None: the topology ends before the sink."""
        self.renderer = renderer
        self.pipeline = pipeline or PipelineSettings()
        self.topics = topics or TopicNames()
        self.lanes = build_lanes(self.pipeline) if lanes else None
        self.topology = tuple(topology)
        given: dict[str, object] = {
            "model": renderer,
            "voices": renderer.synth.registry,
            "lexicons": lexicons,
            "lanes": self.lanes,
        }
        if object_store is not None:
            given["object_store"] = object_store
        self.object_store = object_store
        parts = StageParts(
            KafkaSettings(topic_prefix=self.topics.prefix),  # named, never contacted
            self.pipeline,
            self.topics,
            telemetry or Telemetry(),
            pieces={name: partial(_given, value) for name, value in given.items()},
        )
        self.parts = parts
        self.stages: list[StageLoop] = build_stages(parts, self.topology)
        for stage in self.stages:
            stage.send_through(self._append)
            if log is not None:
                stage.log_to(log)
        self.log: dict[str, list[LoopRecord]] = defaultdict(list)
        """Every record written, by topic, in order (the dead-letter topics included)."""
        self._pending: dict[str, deque[LoopRecord]] = defaultdict(deque)
        """Records not yet handed to their readers, by topic, in order."""
        self._on_record = on_record

    async def __aenter__(self) -> InMemoryTopology:
        return self

    async def warm(self) -> None:
        """What the stages load at start (language identification's models, ~3 s), off the
        loop. Needed where a request may leave its language to detection: cold, the first plan
        could overrun its budget; a request with a language hint never loads them."""
        for spec in self.topology:
            if runs_in_memory(spec, self.parts) and (warm := spec.warmer()) is not None:
                await warm()

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for stage in self.stages:
            stage.release()
        if self.lanes is not None:
            self.lanes.close()

    async def _append(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None
    ) -> Delivered:
        """The stages' `Transport`: the record is on its topic (and acknowledged) at once."""
        record = LoopRecord(topic, 0, len(self.log[topic]), key, value, tuple(headers or ()))
        self.log[topic].append(record)
        self._pending[topic].append(record)
        if self._on_record is not None:
            self._on_record(record)
        return DELIVERED

    async def submit(self, request: TTSRequest) -> None:
        """Write `request` to the requests topic as a producer would (run `run` to process)."""
        if request.delivery.reply_topic:
            raise ValueError("reply topics need the brokers: the in-memory topology writes tts.audio only")
        record = wire.encode(
            request, self.pipeline.delivery.wire_format, source=wire.SOURCE_PREFIX + "/memory"
        )
        await self._append(self.topics.requests, request.request_id.encode(), record.value, record.headers)

    async def submit_delta(self, delta: TextDelta) -> None:
        """Write a streamed utterance's text delta (or flush, or end) to the requests topic."""
        record = wire.encode(delta, self.pipeline.delivery.wire_format, source=wire.SOURCE_PREFIX + "/memory")
        await self._append(self.topics.requests, delta.request_id.encode(), record.value, record.headers)

    async def run(self) -> int:
        """Hand every pending record to its readers until none is left; the records passed.

        Each topic's records go in order; among topics, the one read furthest downstream goes
        first, as running stages would: a request's first PCM is encoded before its second
        segment is synthesized, so first audio comes as early as one process allows."""
        passed = 0
        while record := self._next():
            passed += 1
            if passed > MAX_RECORDS:
                raise RuntimeError(f"more than {MAX_RECORDS} records in one run: a stage feeds itself")
            for stage in self._readers(record.topic):
                if not aimed_elsewhere(record.headers, stage.name):
                    await stage.handle(await stage.take(LoopEvent(record)))
        return passed

    def _next(self) -> LoopRecord | None:
        """The oldest pending record of the most downstream topic that has one."""
        topics = [topic for topic, queue in self._pending.items() if queue]
        if not topics:
            return None
        return self._pending[max(topics, key=self._depth)].popleft()

    def _depth(self, topic: str) -> int:
        """How far downstream `topic` is read: its last reader's place in the data path (a
        topic nobody reads, e.g. tts.audio or a DLQ, first: it costs nothing)."""
        readers = [n for n, stage in enumerate(self.stages) if topic in stage.sources]
        return max(readers, default=len(self.stages))

    def _readers(self, topic: str) -> Iterable[StageLoop]:
        return (stage for stage in self.stages if topic in stage.sources)

    async def render(self, request: TTSRequest) -> list[PcmChunk]:
        """One request through the topology: its PCM chunks, in order. The topics are emptied
        afterwards (a long-lived topology, e.g. the canary's, keeps nothing).

        Raises:
            RecordError: a stage dead-lettered the request (with the dead letter's reason).
        """
        return await self._render(request, self.pcm)

    async def render_file_parts(self, request: TTSRequest) -> list[FilePart]:
        """One request through the topology: what the encode stage hands the sink for it (its
        file parts, in order), from which the stored file is made. Raises as `render`."""
        return await self._render(request, self.file_parts)

    async def render_stored(self, request: TTSRequest) -> StoredRender:
        """One request through the whole topology, the sink included: its result and the files
        the sink stored. Raises as `render`, and RecordError when the sink did not complete it
        (e.g. its audio could not make a file)."""
        return await self._render(request, self._stored)

    def _stored(self, request_id: str) -> StoredRender:
        store = self.object_store
        if store is None:
            raise ValueError("no object store given: the topology ends before the sink")
        results = self.records(self.topics.results, request_id)
        if len(results) != 1:
            raise RecordError(f"the sink wrote {len(results)} results for the request, not one")
        record = results[0]
        result = wire.decode(CompletionResult, record.value, header_pairs(record.headers))
        if result.status != "completed" or result.storage is None:
            raise RecordError(f"the sink finished the request {result.status}: {result.error or 'no file'}")
        refs = [result.storage]
        if result.captions is not None:
            refs += [result.captions.vtt, result.captions.srt, result.captions.words]
        return StoredRender(result, {ref.key: store.get(ref.bucket, ref.key) for ref in refs})

    async def _render(self, request: TTSRequest, read: Callable[[str], R]) -> R:
        try:
            await self.submit(request)
            await self.run()
            for stage in self.stages:
                for record in self.records(self.topics.dlq(stage.name), request.request_id):
                    letter = DeadLetter.from_record(record.key, record.value, record.headers)
                    raise RecordError(
                        f"{stage.name} dead-lettered it ({letter.reason}): {letter.error_message[:200]}"
                    )
            return read(request.request_id)
        finally:
            self.log.clear()
            self._pending.clear()  # a run that raised leaves nothing for the next request
            if self.object_store is not None:
                self.object_store.clear()

    def records(self, topic: str, request_id: str) -> list[LoopRecord]:
        """The records of one request on `topic`, in order."""
        key = request_id.encode()
        return [r for r in self.log[topic] if r.key == key]

    def pcm(self, request_id: str) -> list[PcmChunk]:
        """The request's PCM chunks as synthesize wrote them, in order."""
        return [
            wire.decode(PcmChunk, r.value, header_pairs(r.headers))
            for r in self.records(self.topics.pcm, request_id)
        ]

    def file_parts(self, request_id: str) -> list[FilePart]:
        """The request's file parts as encode wrote them, in order."""
        return [
            wire.decode(FilePart, r.value, header_pairs(r.headers))
            for r in self.records(self.topics.file_parts, request_id)
        ]
