"""The independent checker of a network-fault run: a verdict from what is observable outside
the workers, never from their logs.

It reads, from the start, every record on tts.results, tts.audio and the dead-letter topics
(read_committed under exactly-once, as a subscriber would; read_uncommitted under
at-least-once, where nothing is transactional), and every object in the bucket, with clients of
its own (a plain aiokafka consumer, a plain MinIO client, PyAV to decode). Each invariant gets a
verdict and its counterexamples:

- `results`: every acknowledged request has exactly one result (exactly-once) or at least one
  whose stored audio is identical (at-least-once);
- `no_flips`: no request has a `completed` result and another status;
- `objects`: every completed result's object exists, its size and etag are the result's, and it
  decodes to the result's duration;
- `no_orphans`: no object of the run is left without a completed result;
- `chunks`: each completed request's chunks on tts.audio are complete (every segment, every part
  up to the one marked last) and first seen in order;
- `no_network_dead_letters`: no request of the run was dead-lettered.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from minio import Minio

from streamtts.runtime.settings import KafkaSettings, S3Settings
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import STAGES
from streamtts.schemas import AudioChunk
from streamtts.schemas.wire import decode

DURATION_TOLERANCE_MS = 80.0
"""Decoded vs stated duration: an mp3 decoder adds or trims up to a frame (~26 ms) per end,
plus the encoder's padding; a missing chunk of speech is hundreds of ms."""
READ_TIMEOUT_S = 120.0
INVARIANTS = ("results", "no_flips", "objects", "no_orphans", "chunks", "no_network_dead_letters")


@dataclass
class SeenResult:
    status: str
    at_ms: int
    """The record's timestamp (the sink's clock when it wrote the result)."""
    key: str | None
    size: int | None
    etag: str | None
    duration_ms: float
    chunks: int


@dataclass
class Verdict:
    invariant: str
    ok: bool
    checked: int
    counterexamples: list[str] = field(default_factory=list)
    note: str = ""
    """What held but is worth a number (at-least-once: how many were repeated, identically)."""

    def row(self) -> dict[str, object]:
        return {
            "invariant": self.invariant,
            "verdict": "ok" if self.ok else "VIOLATED",
            "checked": self.checked,
            "counterexamples": ", ".join(self.counterexamples[:5])
            + (" …" if len(self.counterexamples) > 5 else ""),
            "note": self.note,
        }


@dataclass
class History:
    """What the outside saw, per request id of the run."""

    results: dict[str, list[SeenResult]] = field(default_factory=dict)
    chunks: dict[str, list[tuple[int, int, bool, int]]] = field(default_factory=dict)
    """request id → (seq, part, last_part, total) in the order they were read."""
    dead_letters: dict[str, list[str]] = field(default_factory=dict)
    objects: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    """request id → (object key, size, etag) of the audio objects in the bucket."""


async def _read_all(kafka: KafkaSettings, topics: list[str], *, committed: bool) -> list[object]:
    """Every record of `topics` from the beginning to the end they have now."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed" if committed else "read_uncommitted",
        request_timeout_ms=20_000,
    )
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers, request_timeout_ms=20_000)
    await admin.start()
    try:
        described = await admin.describe_topics(topics)
    finally:
        await admin.close()
    await consumer.start()
    try:
        parts = [TopicPartition(t["topic"], p["partition"]) for t in described for p in t["partitions"]]
        if not parts:
            return []
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        records: list[object] = []
        async with asyncio.timeout(READ_TIMEOUT_S):  # the brokers must answer the checker
            while [tp for tp in parts if await consumer.position(tp) < ends[tp]]:
                batch = await consumer.getmany(timeout_ms=1000)
                for recs in batch.values():
                    records.extend(recs)
        return records
    finally:
        await consumer.stop()


async def observe(
    kafka: KafkaSettings,
    topics: TopicNames,
    s3: S3Settings,
    run_prefix: str,
    *,
    exactly_once: bool,
    objects: bool = True,
) -> History:
    """Read the run's whole outcome from Kafka and (`objects`) the bucket."""
    history = History()
    ours = run_prefix.encode()
    for r in await _read_all(kafka, [topics.results], committed=exactly_once):
        if not (r.key or b"").startswith(ours):  # type: ignore[attr-defined]
            continue
        body = orjson.loads(r.value)  # type: ignore[attr-defined]
        storage = body.get("storage") or {}
        history.results.setdefault(body["request_id"], []).append(
            SeenResult(
                status=body.get("status", "?"),
                at_ms=r.timestamp,  # type: ignore[attr-defined]
                key=storage.get("key"),
                size=storage.get("size"),
                etag=storage.get("etag"),
                duration_ms=float(body.get("duration_ms") or 0.0),
                chunks=int(body.get("chunks") or 0),
            )
        )
    for r in await _read_all(kafka, [topics.audio], committed=exactly_once):
        if not (r.key or b"").startswith(ours):  # type: ignore[attr-defined]
            continue
        chunk = decode(AudioChunk, r.value, r.headers)  # type: ignore[attr-defined]
        seen = (chunk.seq, chunk.part, chunk.last_part, chunk.total)
        history.chunks.setdefault(chunk.request_id, []).append(seen)
    dlqs = [topics.dlq(stage) for stage in STAGES]
    for r in await _read_all(kafka, dlqs, committed=exactly_once):
        key = (r.key or b"").decode(errors="replace")  # type: ignore[attr-defined]
        if key.startswith(run_prefix):
            reason = _dlq_reason(r.value)  # type: ignore[attr-defined]
            history.dead_letters.setdefault(key, []).append(reason)
    if objects:
        history.objects = await asyncio.to_thread(_list_objects, s3, run_prefix)
    return history


def _dlq_reason(value: bytes | None) -> str:
    try:
        body = orjson.loads(value or b"{}")
    except orjson.JSONDecodeError:
        return "?"
    return str(body.get("reason") or body.get("error") or "?")[:120]


def _minio(s3: S3Settings) -> Minio:
    return Minio(
        s3.endpoint, access_key=s3.access_key, secret_key=s3.secret_key, secure=s3.secure, region=s3.region
    )


def _list_objects(s3: S3Settings, run_prefix: str) -> dict[str, tuple[str, int, str]]:
    client = _minio(s3)
    found: dict[str, tuple[str, int, str]] = {}
    for obj in client.list_objects(s3.bucket, recursive=True):
        name = obj.object_name or ""
        stem = name.rsplit("/", 1)[-1]
        request_id, dot, ext = stem.rpartition(".")
        if dot and request_id.startswith(run_prefix) and ext not in ("vtt", "srt", "json", "done"):
            found[request_id] = (name, obj.size or 0, (obj.etag or "").strip('"'))
    return found


def _decoded_ms(data: bytes) -> float:
    """The audio's duration as a decoder sees it: samples decoded / rate (PyAV, libav's own)."""
    import av

    with av.open(io.BytesIO(data), mode="r") as container:
        stream = container.streams.audio[0]
        samples, rate = 0, stream.sample_rate or stream.codec_context.sample_rate
        for frame in container.decode(stream):
            samples += frame.samples
            rate = frame.sample_rate or rate
    return 1000.0 * samples / rate if rate else 0.0


def check(
    history: History, acknowledged: Iterable[str], s3: S3Settings, *, exactly_once: bool
) -> list[Verdict]:
    """The verdict per invariant (`INVARIANTS`, in order). Reads objects from the bucket."""
    acked = sorted(set(acknowledged))
    lost = [k for k in acked if not history.results.get(k)]
    dup = [k for k in acked if len(history.results.get(k, [])) > 1]
    differing = [k for k in dup if len({(s.status, s.etag, s.size) for s in history.results[k]}) > 1]
    results = Verdict("results", not lost and not (dup if exactly_once else differing), len(acked))
    results.counterexamples = [f"{k} lost" for k in lost] + [
        f"{k} ×{len(history.results[k])}" + (" differing" if k in differing else "")
        for k in (dup if exactly_once else differing)
    ]
    if dup and not exactly_once:
        same = len(dup) - len(differing)
        results.note = f"{len(dup)} with more than one result, {same} of them identical"
    flipped = [
        k
        for k, seen in history.results.items()
        if "completed" in {s.status for s in seen} and {s.status for s in seen} != {"completed"}
    ]
    flips = Verdict("no_flips", not flipped, len(history.results), flipped)
    completed = {k: seen[0] for k, seen in history.results.items() if seen and seen[0].status == "completed"}
    client = _minio(s3)

    def fetch(key: str) -> bytes:
        resp = client.get_object(s3.bucket, key)
        try:
            return bytes(resp.read())
        finally:
            resp.close()
            resp.release_conn()

    bad_objects = object_problems(completed, history.objects, fetch)
    objects = Verdict("objects", not bad_objects, len(completed), bad_objects)
    orphans = sorted(k for k in history.objects if k not in completed)
    no_orphans = Verdict("no_orphans", not orphans, len(history.objects), orphans)
    bad_chunks = [
        f"{k}: {why}" for k in sorted(completed) if (why := chunks_problem(history.chunks.get(k, [])))
    ]
    chunks = Verdict("chunks", not bad_chunks, len(completed), bad_chunks)
    lettered = [f"{k} ({'; '.join(v)})" for k, v in sorted(history.dead_letters.items())]
    dlq = Verdict("no_network_dead_letters", not lettered, len(acked), lettered)
    return [results, flips, objects, no_orphans, chunks, dlq]


def object_problems(
    completed: dict[str, SeenResult], objects: dict[str, tuple[str, int, str]], fetch: Callable[[str], bytes]
) -> list[str]:
    """Completed results whose object is missing, differs from what the result says, or does
    not decode to the result's duration."""
    bad = []
    for k, res in sorted(completed.items()):
        stored = objects.get(k)
        if stored is None or res.key != stored[0]:
            bad.append(f"{k} missing")
            continue
        if res.size != stored[1] or (res.etag and res.etag.strip('"') != stored[2]):
            bad.append(f"{k} size/etag {stored[1]}≠{res.size}")
            continue
        decoded = _decoded_ms(fetch(stored[0]))
        if abs(decoded - res.duration_ms) > DURATION_TOLERANCE_MS:
            bad.append(f"{k} decodes to {decoded:.0f} ms, result says {res.duration_ms:.0f}")
    return bad


def chunks_problem(seen: list[tuple[int, int, bool, int]]) -> str | None:
    """Why a completed request's chunks are incomplete or out of order (None: they are fine).
    A redelivered chunk may repeat (the encode stage is at-least-once), so order is judged on
    first appearances."""
    if not seen:
        return "no chunks"
    firsts: list[tuple[int, int]] = []
    for seq, part, _last, _total in seen:
        if (seq, part) not in firsts:
            firsts.append((seq, part))
    if firsts != sorted(firsts):
        return f"out of order {firsts[:6]}"
    total = seen[0][3]
    for seq in range(total):
        parts = sorted({p for s, p, _l, _t in seen if s == seq})
        ends = {p for s, p, last, _t in seen if s == seq and last}
        if not parts or parts != list(range(len(parts))) or max(parts) not in ends:
            return f"segment {seq} incomplete (parts {parts})"
    return None
