"""Encode stage: tts.pcm → audio chunks on tts.audio and the request's reply topic, and each
chunk's part of the stored file on tts.file.parts (faust).

A request's chunks are encoded by one continuous encoder where the format has one (mp3), so
they join into one gapless stream; otherwise, and for a one-chunk request, each chunk is
encoded on its own (stateless). Either way every payload decodes alone and the concatenation
of a request's chunks plays (see `streamtts.audio.formats`, and `streams` for what a
failover mid-request costs a stream).

The sink stores what was streamed: each chunk's file part carries the payload subscribers got
where the format's payloads make the file (one continuous mp3 stream, raw samples, WAV), so a
request is encoded once; otherwise (opus, flac) it carries the PCM, and the sink encodes the
file. A request that stores nothing gets parts without audio (its result needs only lengths).

A request's first chunk is what its caller waits for, so it does not queue behind other
requests' later chunks: the stage reads ahead (`encode_lookahead` records, ≤ 5 s of audio
each), encodes one first chunk and one later chunk at a time side by side, each request's
chunks one after another (so they leave in order), and acks in offset order. Under
exactly-once the stage keeps one record at a time: a transaction would commit the outputs of
a later record whose ack waits for an earlier one, and a restart would send them again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import numpy as np
from faust.types import EventT

from streamtts.audio import formats
from streamtts.audio.codecs import encode_chunk
from streamtts.audio.exceptions import EncodingError
from streamtts.processors.encode.streams import OpenStreams, StreamStep
from streamtts.runtime.byte_lru import ByteLRU
from streamtts.runtime.faust_stage import FaustStage, source_of
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.taken import ReadAhead, Taken
from streamtts.runtime.topology import GroupSpec, StageSpec
from streamtts.schemas import AudioChunk, ContractError, FilePart, PcmChunk, wire
from streamtts.schemas.chunks import ChunkRecord, FileCarries, StreamUse
from streamtts.schemas.headers import carried_headers

ENCODES = {True: 1, False: 1}
"""Encodes in flight at once: one first chunk beside one later chunk (pool threads)."""


class EncodedChunks(ByteLRU[bytes]):
    """Payloads of recently encoded PCM, bounded in bytes (LRU).

    Encoding is a pure function of (PCM, rate, format) — the Opus serial is a CRC of the
    samples — and a render cache hit brings back byte-identical PCM, so its encoding can be
    reused: a cached span's MP3 costs no encoder time (it was ~80 ms of a hit's first audio).
    """

    @staticmethod
    def key(chunk: PcmChunk) -> bytes:
        digest = hashlib.sha256(chunk.pcm)
        digest.update(f"\0{chunk.sample_rate}\0{chunk.request.format}\0{chunk.request.codec}".encode())
        return digest.digest()


def encode_pcm_chunk(
    chunk: PcmChunk, encoded: EncodedChunks | None = None, stream: StreamStep | None = None
) -> AudioChunk:
    """PCM chunk → independently decodable audio chunk in the requested format: the next
    frames of the request's `stream`, or the chunk encoded alone (pure, or served from
    `encoded` when this PCM was encoded alone before)."""
    ctx = chunk.request
    reuse = encoded if stream is None else None  # a stream's frames depend on what came before
    key = EncodedChunks.key(chunk) if reuse is not None else b""
    payload = reuse.get(key) if reuse is not None else None
    samples = np.frombuffer(chunk.pcm, dtype="<i2")
    if chunk.cancelled:
        payload = b""  # a marker: the stream ends here, nothing to encode
    elif stream is not None:
        payload = stream.encoder.feed(samples)
        if stream.final:
            payload += stream.encoder.finish()
    elif payload is None:
        payload = encode_chunk(samples, chunk.sample_rate, ctx.format, codec=ctx.codec)
        if reuse is not None:
            reuse.put(key, payload)
    return AudioChunk(
        request_id=chunk.request_id,
        tenant=ctx.tenant,
        seq=chunk.seq,
        total=chunk.total,
        part=chunk.part,
        last_part=chunk.last_part,
        last=chunk.last,
        format=ctx.format,
        sample_rate=chunk.sample_rate,
        audio=payload,
        duration_ms=chunk.duration_ms,
        degradation=chunk.degradation,
        cache=chunk.cache,
        offset_ms=chunk.offset_ms,
        words=chunk.words,
        marks=chunk.marks,
        lexicon_version=ctx.lexicon_version,
        cancelled=chunk.cancelled,
        metadata=ctx.metadata,
        release=ctx.release,
        created_at=ctx.created_at,
        encoded_at=datetime.now(UTC),
    )


def build_stage(parts: StageParts, spec: StageSpec, group: GroupSpec) -> EncodeStage:
    """The encode stage where `spec` places it (`StageSpec.build`)."""
    return EncodeStage(parts, spec=spec)


class EncodeStage(FaustStage):
    name = "encode"

    def __init__(self, parts: StageParts, *, spec: StageSpec | None = None) -> None:
        super().__init__(parts, spec=spec)
        pipeline = parts.pipeline
        self.pool = ThreadPoolExecutor(max_workers=sum(ENCODES.values()), thread_name_prefix="encode")
        # Only worth it where the render cache repeats PCM; off with the render cache.
        self.encoded = EncodedChunks(32 * 1024 * 1024) if pipeline.render_cache.enabled else None
        self.streams = OpenStreams(idle_s=pipeline.storage.sink_stale_s)
        delivery = pipeline.delivery
        self._reads_ahead = delivery.encode_lookahead > 0 and delivery.processing_guarantee != "exactly_once"
        # A topology without the sink (in memory: `streamtts synth`, the bench baseline) has
        # no file parts to write.
        self._feeds_sink = "file_parts" in self.spec.outputs

    def read_ahead(self) -> ReadAhead | None:
        """`encode_lookahead` records ahead, first chunks first, `ENCODES` at once; none under
        exactly-once (see the module's docstring)."""
        if not self._reads_ahead:
            return None
        return ReadAhead(self.pipeline.delivery.encode_lookahead, ENCODES)

    async def take(self, event: EventT) -> Taken[PcmChunk]:
        """Decode the chunk (once); one that cannot be read goes to the DLQ at once, queued
        for nothing."""
        try:
            chunk = wire.decode(PcmChunk, event.message.value, event.message.headers)
        except ContractError as err:
            return Taken(event, error=err, now=True)
        return Taken(event, chunk, first=_first_chunk(chunk))

    async def handle(self, taken: Taken[PcmChunk]) -> str | None:
        started = time.perf_counter()
        event, chunk = taken.event, taken.value
        if chunk is None:
            return await self.dead_letter(source_of(event), taken.error or ValueError("unreadable chunk"))
        live = self.topics.chunk_topics(chunk.request.delivery)
        carries = self._carries(chunk)
        key = chunk.request_id.encode()
        carried = carried_headers(event.message.headers)
        stream: StreamStep | None = None
        audio: AudioChunk | None = None
        try:
            if live or carries == "frames":
                # On the loop: a request's chunks come one after another, so its stream is fed
                # by one pool thread at a time.
                stream = self.streams.step(chunk)
                audio = await asyncio.get_running_loop().run_in_executor(
                    self.pool,
                    encode_pcm_chunk,
                    chunk,
                    self.encoded if chunk.cache == "hit" or chunk.cache == "miss" else None,
                    stream,
                )
        except (EncodingError, ValueError) as err:
            self.streams.drop(chunk)  # its stream has a hole now: the next chunk opens another
            if self._feeds_sink:
                # The sink still gets the chunk, as PCM: its request finishes now (its file
                # made from what it has, or failed with the reason), not after the stale timeout.
                fallback: FileCarries = "none" if carries == "none" else "pcm"
                await self._send_part(key, carried, file_part(chunk, fallback, b"", "alone"))
            return await self.dead_letter(
                source_of(event), err, request_id=chunk.request_id, tenant=chunk.request.tenant
            )
        sends = []
        if audio is not None and live:
            record = wire.encode(
                audio,
                self.pipeline.delivery.wire_format,
                content_type=formats.get(audio.format).media_type(audio.sample_rate),
            )
            out = [*carried, *record.headers] or None
            sends = [await self.outputs.send(name, key, record.value, out) for name in live]
        use: StreamUse = stream.use if stream is not None else "alone"
        if self._feeds_sink:
            # After the live chunks: a subscriber's audio never waits for the sink's copy.
            part = file_part(chunk, carries, audio.audio if audio is not None else b"", use)
            await self._send_part(key, carried, part)
        if chunk.seq == 0 and chunk.part == 0 and sends and not chunk.cancelled:
            # Time to first audio: acked by the broker, i.e. a subscriber can now read it.
            for pending in sends:
                await pending
            ttfa = (datetime.now(UTC) - chunk.request.created_at).total_seconds()
            self.telemetry.ttfa.labels(chunk.request.format).observe(max(0.0, ttfa))
        if audio is not None:
            self.telemetry.chunk_bytes.labels(audio.format).observe(len(audio.audio))
        self.log_record(
            "encoded",
            started,
            chunk.request,
            voice=chunk.voice_used,
            release=chunk.request.release,
            lang=chunk.lang,
            seq=chunk.seq,
            part=chunk.part,
            last=chunk.last,
            format=chunk.request.format,
            bytes=len(audio.audio) if audio is not None else 0,
            stream=use if audio is not None else "none",
            file_part=carries,
            # A stream opened mid-request has the encoder's delay at this boundary again.
            level=logging.WARNING if stream is not None and stream.use == "reopened" else logging.INFO,
        )
        return "ok"

    async def _send_part(self, key: bytes, carried: list[tuple[str, bytes]], part: FilePart) -> None:
        record = wire.encode(part, self.pipeline.delivery.wire_format, content_type=_part_type(part))
        headers = [*carried, *record.headers] or None
        await self.outputs.send(self.topics.file_parts, key, record.value, headers)

    def _carries(self, chunk: PcmChunk) -> FileCarries:
        """What `chunk`'s file part carries: nothing when the request stores no file (or
        this is a cancel marker), its streamed frames where they make the file, else PCM."""
        if chunk.cancelled or not chunk.request.delivery.storage or not self._feeds_sink:
            return "none"
        codec = formats.get(chunk.request.format)
        if self.pipeline.storage.store_streamed_frames and codec.stores_streamed_frames:
            return "frames"
        return "pcm"

    def release(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def file_part(chunk: PcmChunk, carries: FileCarries, payload: bytes, use: StreamUse) -> FilePart:
    """`chunk`'s part of its request's stored file (see `schemas.chunks.FilePart`)."""
    # The chunk's own (validated) values, not validated again: a part per chunk is hot.
    fields = {name: getattr(chunk, name) for name in ChunkRecord.model_fields}
    audio = {"frames": payload, "pcm": chunk.pcm, "none": b""}[carries]
    return FilePart.model_construct(
        **fields,
        carries=carries,
        audio=audio,
        sample_count=chunk.n_samples,
        stream=use if carries == "frames" else None,
    )


def _part_type(part: FilePart) -> str:
    """A file part's content type: its format's where it carries frames, else PCM's."""
    if part.carries == "frames":
        return formats.get(part.request.format).media_type(part.sample_rate)
    return wire.pcm_content_type(part.sample_rate)


def _first_chunk(chunk: PcmChunk) -> bool:
    """A request's first audio (what its caller waits for); a cancel marker is not."""
    return chunk.seq == 0 and chunk.part == 0 and not chunk.cancelled
