"""Re-run requests found on the requests topic: by id, or every one in a time window. A
streamed utterance is re-rendered from the text its deltas assembled, as one whole request
(`found_requests`)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaProducer

from streamtts.errors import ConfigError
from streamtts.producers.replay.found_requests import Found, RequestsFound, UtteranceLimits
from streamtts.producers.replay.ledger import ReplayLedger, ledger_and_producer
from streamtts.producers.replay.options import DEFAULT_OPTIONS, ReplayOptions
from streamtts.producers.replay.summary import ReplaySummary
from streamtts.runtime.kafka import key_partition, topic_partitions
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.snapshot import snapshot
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import TTSRequest
from streamtts.schemas.headers import replay_headers
from streamtts.schemas.trace import replay_trace


def _rewrite(
    request: TTSRequest,
    *,
    voice: str | None,
    fmt: str | None,
    new_id: str | None,
    namespace: str | None,
    lexicon_version: int | None = None,
) -> TTSRequest:
    fields: dict[str, Any] = request.model_dump(mode="json")
    if lexicon_version is not None:
        # Said with the lexicon version the original result records, not today's.
        fields["lexicon_version"] = lexicon_version
    if voice:
        fields["voice"] = voice
    if fmt:
        fields["format"] = fmt
    if new_id:
        fields["request_id"] = new_id
    if namespace:
        # A separate output namespace: only the stored file, under NS/…, no live chunk stream
        # (subscribers of the default topic must not hear a re-render of an old request).
        fields["delivery"] = {
            **fields["delivery"],
            "namespace": namespace,
            "chunks": False,
            "reply_topic": None,
            "storage": True,
        }
    fields["created_at"] = fields["created_at"] if not new_id else datetime.now(UTC).isoformat()
    return TTSRequest.from_obj(fields)


async def _resubmit(
    producer: AIOKafkaProducer,
    ledger: ReplayLedger,
    topics: TopicNames,
    replay: TTSRequest,
    origin: str,
    ledger_key: str,
    original_headers: object = (),
) -> None:
    """Submit `replay` to the requests topic, marked as a replay of `origin` addressed to the
    segment stage, then record `ledger_key` so the same replay is not submitted twice. The
    replay is a new trace, linked to the original's (`original_headers`)."""
    await producer.send_and_wait(
        topics.requests,
        key=replay.request_id.encode(),
        value=replay.to_bytes(),
        headers=[*replay_headers(origin, stage="segment"), *replay_trace(original_headers)],
    )
    await ledger.record(producer, ledger_key, topics.requests)


def _limits() -> UtteranceLimits:
    """The segment stage's bounds of an utterance, as the environment sets them."""
    return UtteranceLimits.of(PipelineSettings.from_env().text)


def _partitions_of(request_ids: Iterable[str], partitions: Iterable[int]) -> set[int]:
    """The partitions the ids' records are on: keys map to partitions as the producer mapped
    them (murmur2), so only those need reading."""
    return {key_partition(rid.encode(), partitions) for rid in request_ids}


async def replay_requests(
    kafka: KafkaSettings,
    request_ids: Iterable[str],
    *,
    voice: str | None = None,
    fmt: str | None = None,
    new_ids: bool = True,
    namespace: str | None = None,
    options: ReplayOptions = DEFAULT_OPTIONS,
    lexicon_version: int | None = None,
    limits: UtteranceLimits | None = None,
) -> tuple[ReplaySummary, dict[str, str]]:
    """Find each id on the requests topic (only the partition its key maps to is read) and
    submit it again (a streamed utterance: the text it said, as one whole request; `limits`:
    the segment stage's, default from the environment), at most `options.rate` a second.
    Returns the summary and {original id: replayed id}."""
    wanted = list(dict.fromkeys(request_ids))
    if not wanted:
        raise ConfigError("give at least one request id")
    topics = TopicNames(kafka.topic_prefix)
    partitions = await topic_partitions(kafka, topics.requests)
    if not partitions:
        raise ConfigError(f"topic {topics.requests!r} does not exist")
    targets = _partitions_of(wanted, partitions)
    reader = RequestsFound(limits or _limits(), set(wanted))
    summary = options.summary()
    async for record in snapshot(kafka, topics.requests, partitions=targets):
        summary.read += 1
        reader.take(record)
    reader.expired(time.time() * 1000, all_open=True)
    found: dict[str, tuple[TTSRequest, object]] = {}
    for rid in wanted:
        entry = reader.found.get(rid)
        if entry is None:
            summary.skip("not_found")
        elif not entry.ended:
            summary.skip("utterance_still_open")  # its writer may still be writing it
        elif (request := entry.request) is None:
            summary.skip("utterance_said_nothing")
        else:
            found[rid] = (request, entry.headers)
    mapping: dict[str, str] = {}
    pacer = options.pacer()
    async with ledger_and_producer(kafka, topics.replay_ledger) as (ledger, producer):
        for rid, (original, original_headers) in found.items():
            n = sum(1 for k in ledger.done if k.startswith(f"request:{rid}#")) + 1
            new_id = f"{rid[:110]}.r{n}" if new_ids else None
            ledger_key = f"request:{rid}#{n}" if new_ids else f"request:{rid}#same:{voice}:{fmt}:{namespace}"
            if not new_ids and options.already_replayed(ledger, ledger_key, summary):
                continue
            replay = _rewrite(
                original,
                voice=voice,
                fmt=fmt,
                new_id=new_id,
                namespace=namespace,
                lexicon_version=lexicon_version,
            )
            mapping[rid] = replay.request_id
            summary.redriven += 1
            if options.dry_run:
                summary.planned.append(
                    f"request {rid} → {replay.request_id} voice={replay.voice} format={replay.format}"
                )
                continue
            await pacer.wait()
            await _resubmit(producer, ledger, topics, replay, f"request:{rid}", ledger_key, original_headers)
    return summary, mapping


async def replay_window(
    kafka: KafkaSettings,
    since: datetime,
    until: datetime,
    *,
    namespace: str | None = None,
    options: ReplayOptions = DEFAULT_OPTIONS,
    limits: UtteranceLimits | None = None,
) -> ReplaySummary:
    """Replay every request whose record timestamp is in [since, until) (offsets by time).

    With `namespace`, outputs are stored under NS/… so a new model's renders can be compared
    with the old ones without overwriting them; ids are kept so the pairs line up.
    """
    if since >= until:
        raise ConfigError(f"--from ({since.isoformat()}) must be before --to ({until.isoformat()})")
    topics = TopicNames(kafka.topic_prefix)
    summary = options.summary()
    window = f"window:{since.isoformat()}..{until.isoformat()}:{namespace or ''}"
    pacer, bar = options.pacer(), options.progress_line("window")
    reader = RequestsFound(limits or _limits())
    reached: dict[int, int] = {}

    async def replay(entry: Found) -> None:
        reader.found.pop(entry.opener.request_id, None)  # a window holds only open utterances
        request = entry.request
        if request is None:
            summary.skip("utterance_said_nothing")
            return
        ledger_key = f"{window}:{request.request_id}"
        if options.already_replayed(ledger, ledger_key, summary):
            return
        replayed = _rewrite(request, voice=None, fmt=None, new_id=None, namespace=namespace)
        summary.redriven += 1
        if options.dry_run:
            summary.planned.append(f"{request.request_id}" + (" (streamed)" if entry.streamed else ""))
            return
        await pacer.wait()
        await _resubmit(producer, ledger, topics, replayed, window, ledger_key, entry.headers)
        bar.update(summary.read, summary.redriven)

    async with ledger_and_producer(kafka, topics.replay_ledger) as (ledger, producer):
        try:
            async for record in snapshot(kafka, topics.requests, since=since, until=until, reached=reached):
                summary.read += 1
                for gone in reader.expired(record.timestamp):  # their writers went silent
                    await replay(gone)
                if (entry := reader.take(record)) is not None:
                    await replay(entry)
            # Utterances opened in the window whose end came after it: their text is read on
            # (an utterance is replayed whole, never cut at a time) until each has ended — by
            # its end, a limit, or its writer's silence — or the partitions' end now.
            if unfinished := reader.unfinished:
                reader.wanted = unfinished
                theirs = _partitions_of(unfinished, reached)
                more = snapshot(kafka, topics.requests, from_offsets=reached, partitions=theirs)
                async with aclosing(more) as records:
                    async for record in records:
                        for gone in reader.expired(record.timestamp):
                            await replay(gone)
                        if (entry := reader.take(record)) is not None:
                            await replay(entry)
                        if not reader.unfinished:
                            break
                for gone in reader.expired(time.time() * 1000, all_open=True):
                    await replay(gone)
                for _ in reader.unfinished:
                    summary.skip("utterance_still_open")  # its writer may still be writing it
        finally:
            bar.done()
    for _ in range(reader.invalid):
        summary.skip("invalid_request")
    for _ in range(reader.orphan_deltas):
        summary.skip("delta_of_an_utterance_opened_earlier")
    return summary
