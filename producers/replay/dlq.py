"""Re-drive dead letters back to the topic they came from."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from streamtts.errors import ConfigError
from streamtts.producers.replay.ledger import ledger_and_producer
from streamtts.producers.replay.options import DEFAULT_OPTIONS, ReplayOptions
from streamtts.producers.replay.summary import ReplaySummary
from streamtts.runtime.kafka import topic_partitions
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.snapshot import snapshot
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import TOPOLOGY
from streamtts.schemas import ContractError, DeadLetter
from streamtts.schemas.dead_letter import DlqHeader
from streamtts.schemas.headers import replay_headers
from streamtts.schemas.trace import replay_trace, without_trace


@dataclass(frozen=True)
class DlqFilter:
    """Which dead letters to re-drive; None fields match everything."""

    reason: str | None = None
    error_class: str | None = None
    tenant: str | None = None
    request_ids: frozenset[str] | None = None
    since: datetime | None = None
    until: datetime | None = None

    def matches(self, letter: DeadLetter) -> bool:
        return (
            (self.reason is None or letter.reason == self.reason)
            and (self.error_class is None or letter.error_class == self.error_class)
            and (self.tenant is None or letter.tenant == self.tenant)
            and (self.request_ids is None or (letter.request_id or letter.key_text) in self.request_ids)
            and (self.since is None or letter.failed_at >= self.since)
            and (self.until is None or letter.failed_at < self.until)
        )


async def replay_dlq(
    kafka: KafkaSettings,
    stage: str,
    flt: DlqFilter | None = None,
    *,
    options: ReplayOptions = DEFAULT_OPTIONS,
    max_attempts: int = 5,
) -> ReplaySummary:
    """Re-drive the dead letters of `stage` that match `flt` to their original topics.

    Each re-driven record keeps the DLQ's attempt count and first-failure time in its
    headers, so if it fails again its new dead letter shows attempts + 1. Records at
    `max_attempts` are skipped unless `options.force`; records already in the ledger are
    skipped unless `options.force`; the DLQ is read up to its end at start, so a replay
    never re-reads its own failures.
    """
    stages = [spec.name for spec in TOPOLOGY]
    if stage not in stages:
        raise ConfigError(f"unknown stage {stage!r}; stages are {', '.join(stages)}")
    if flt and flt.since and flt.until and flt.since >= flt.until:
        raise ConfigError("--since must be before --until")
    flt = flt or DlqFilter()
    topics = TopicNames(kafka.topic_prefix)
    dlq_topic = topics.dlq(stage)
    if not await topic_partitions(kafka, dlq_topic):
        raise ConfigError(f"dead-letter topic {dlq_topic!r} does not exist")
    summary = options.summary()
    pacer, bar = options.pacer(), options.progress_line(f"dlq {stage}")
    async with ledger_and_producer(kafka, topics.replay_ledger) as (ledger, producer):
        try:
            async for record in snapshot(kafka, dlq_topic):
                summary.read += 1
                try:
                    letter = DeadLetter.from_record(record.key, record.value, record.headers)
                except ContractError:
                    summary.skip("not_a_dead_letter")
                    continue
                if not flt.matches(letter):
                    summary.skip("filtered")
                    continue
                if not topics.is_source(stage, letter.topic):
                    # The dead letter names its origin in a header anyone can write: re-drive only
                    # to what this stage reads (its topology sources), never to an arbitrary topic.
                    summary.skip("foreign_topic")
                    continue
                ledger_key = f"dlq:{dlq_topic}/{record.partition}@{record.offset}"
                if options.already_replayed(ledger, ledger_key, summary):
                    continue
                if letter.attempts >= max_attempts and not options.force:
                    summary.skip("max_attempts")
                    continue
                if options.dry_run:
                    summary.redriven += 1
                    summary.planned.append(
                        f"{ledger_key} → {letter.topic} key={letter.key_text} "
                        f"reason={letter.reason} attempts={letter.attempts}"
                    )
                    continue
                await pacer.wait()
                # The record as it was (its own headers), marked as a replay, carrying the attempt
                # count and first failure so a second failure adds to them.
                headers = [
                    *without_trace(letter.original_headers),
                    *replay_headers(ledger_key, stage=stage),
                    *replay_trace(letter.original_headers),  # a new trace, linked to the original's
                    (DlqHeader.ATTEMPTS, str(letter.attempts).encode()),
                    (DlqHeader.FIRST_FAILURE_AT, letter.first_failure_at.isoformat().encode()),
                ]
                try:
                    await producer.send_and_wait(
                        letter.topic,
                        key=letter.key,
                        value=letter.payload,
                        headers=headers,
                    )
                    await ledger.record(producer, ledger_key, letter.topic)
                except Exception as err:  # the broker refused this one: count it, go on
                    summary.failed += 1
                    summary.failures[type(err).__name__] += 1
                    continue
                summary.redriven += 1
                bar.update(summary.read, summary.redriven)
        finally:
            bar.done()
    return summary
