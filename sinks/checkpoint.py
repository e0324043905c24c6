"""How the sink's outputs and consumed offsets become durable, as numbered steps.

exactly_once — one transactional producer per input partition, with a transactional id that
is stable for the partition (`{group}-{topic}-{partition}`, as faust does for its stages).
Whoever owns the partition next initializes the same id, which bumps its epoch and fences a
zombie predecessor: a paused or partitioned old owner can no longer commit anything.
  1. the first output for a partition opens that partition's transaction;
  2. results and dead letters are sent inside it and acknowledged;
  3. `commit` adds the partition's committable offset to the same transaction;
  4. the transaction commits: outputs and offsets become visible together, or neither does.
at_least_once — one idempotent producer: outputs are sent and acknowledged first, then the
offsets are committed; a crash in between re-reads records, which the sink's memory of
finished requests skips.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, ProducerFenced

from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import make_producer
from streamtts.runtime.settings import KafkaSettings
from streamtts.sinks.exceptions import PartitionRevoked

TopicPart = tuple[str, int]
log = logging.getLogger("streamtts.sink")


def transactional_id(group: str, tp: TopicPart) -> str:
    """Stable per input partition: the fencing key of exactly-once."""
    return f"{group}-{tp[0]}-{tp[1]}"


def _fenced(producer: AIOKafkaProducer) -> bool:
    """Whether the producer's transactions ended for good: fenced by a newer owner of its id
    (a zombie that was cut off), or another fatal error. aiokafka keeps that state on its
    transaction manager and has no public accessor."""
    txn = getattr(producer, "_txn_manager", None)
    return txn is not None and bool(txn.is_fatal_error())


async def _abort(producer: AIOKafkaProducer, tp: TopicPart) -> None:
    """Abort `tp`'s open transaction. A fenced producer cannot (aiokafka asserts on it) and need
    not: the coordinator aborted it when the next owner took the id. An unreachable broker
    aborts it by the transaction timeout. Either way nothing of it becomes visible."""
    if _fenced(producer):
        log_event(log, "transaction_fenced", logging.WARNING, partition=f"{tp[0]}/{tp[1]}")
        return
    try:
        await producer.abort_transaction()
    except KafkaError as err:
        log_event(log, "abort_failed", logging.WARNING, partition=f"{tp[0]}/{tp[1]}", error=str(err)[:200])


class SinkCheckpoint:
    def __init__(
        self,
        kafka: KafkaSettings,
        group: str,
        consumer: AIOKafkaConsumer | None = None,
        *,
        exactly_once: bool,
        on_settled: Callable[[TopicPart, bool], None] | None = None,
    ) -> None:
        self.kafka = kafka
        self.on_settled = on_settled
        """exactly_once: told each partition's transaction's fate — committed (True), or
        aborted, fenced or failed (False: none of its outputs will ever be visible)."""
        self.group = group
        self.consumer = consumer
        """The sink's consumer (at-least-once commits through it), set once it is made."""
        self.exactly_once = exactly_once
        self._shared: AIOKafkaProducer | None = None
        self._tx: dict[TopicPart, AIOKafkaProducer] = {}
        """exactly_once: the producer of each assigned partition."""
        self._open: set[TopicPart] = set()
        """Partitions whose transaction is open (step 1 happened, step 4 not yet)."""
        self._committed: dict[TopicPart, int] = {}
        self.owned: set[TopicPart] = set()
        """Partitions assigned to this sink now (a rebalance may revoke one mid-batch)."""
        self._epochs: dict[TopicPart, int] = {}
        """How many times each partition was assigned here: a record read under one
        assignment must not be sent under the next (revoked and given back mid-record)."""
        self._lock = asyncio.Lock()
        """One step at a time: the rebalance listener runs while the loop may be mid-commit, and
        a transactional producer refuses to begin a transaction while it is committing one."""

    async def start(self) -> None:
        if not self.exactly_once:
            self._shared = make_producer(self.kafka)
            await self._shared.start()

    async def assign(self, tps: set[TopicPart]) -> None:
        """exactly_once: start (and so fence the old owner of) each new partition's producer."""
        async with self._lock:
            self.owned |= tps
            for tp in tps:
                self._epochs[tp] = self._epochs.get(tp, 0) + 1
            if not self.exactly_once:
                return
            for tp in sorted(tps - set(self._tx)):
                producer = make_producer(self.kafka, transactional_id=transactional_id(self.group, tp))
                await producer.start()  # init_transactions: fences the previous holder of this id
                self._tx[tp] = producer

    async def wait_assigned(self) -> None:
        """Returns once no assignment is being taken: the new partitions' producers have
        started, so their previous owners are fenced."""
        async with self._lock:
            return

    async def revoke(self, tps: set[TopicPart], offsets: dict[TopicPart, int]) -> None:
        """Commit what is finished on `tps`, then let them go (their producers stop)."""
        async with self._lock:
            try:
                await self._commit({tp: off for tp, off in offsets.items() if tp in tps})
            except KafkaError as err:  # the next owner re-reads from the last commit: redone, not lost
                log_event(log, "commit_on_revoke_failed", logging.WARNING, error=str(err)[:200])
            self.owned -= tps
            for tp in tps:
                self._committed.pop(tp, None)
                producer = self._tx.pop(tp, None)
                if producer is not None:
                    if tp in self._open:  # outputs without their offsets: invisible, redone by the next owner
                        self._open.discard(tp)
                        await _abort(producer, tp)
                        self._settled(tp, False)
                    await producer.stop()

    def epoch(self, tp: TopicPart) -> int:
        """The partition's current assignment here (see `send`)."""
        return self._epochs.get(tp, 0)

    async def send(
        self,
        tp: TopicPart,
        topic: str,
        key: bytes | None,
        value: bytes,
        headers: list[tuple[str, bytes]] | None = None,
        *,
        epoch: int | None = None,
    ) -> None:
        """Send one output caused by a record of `tp` and wait for the broker's ack. `epoch`:
        the assignment the record was read under; another one now means the partition was
        revoked (and perhaps given back) while the record was handled — its next reader
        redoes it, and this send would be its second result."""
        async with self._lock:
            if tp not in self.owned or (epoch is not None and epoch != self._epochs.get(tp)):
                raise PartitionRevoked(f"{tp[0]}/{tp[1]} was revoked")
            if not self.exactly_once:
                assert self._shared is not None, "start() first"
                await self._shared.send_and_wait(topic, key=key, value=value, headers=headers)
                return
            producer = self._tx[tp]
            if tp not in self._open:  # 1. open the partition's transaction
                await producer.begin_transaction()
                self._open.add(tp)
            await producer.send_and_wait(topic, key=key, value=value, headers=headers)  # 2.

    async def commit(self, offsets: dict[TopicPart, int]) -> None:
        """Make outputs and consumed offsets durable; offsets only move forward."""
        async with self._lock:
            await self._commit(offsets)

    async def abort(self) -> None:
        """Nothing of the open transactions becomes visible; a restart redoes that work."""
        async with self._lock:
            for tp in sorted(self._open):
                self._open.discard(tp)
                await _abort(self._tx[tp], tp)
                self._settled(tp, False)

    async def _commit(self, offsets: dict[TopicPart, int]) -> None:
        """`commit` without taking the lock (`revoke` holds it already)."""
        fresh = {tp: off for tp, off in offsets.items() if off > self._committed.get(tp, -1)}
        if not self.exactly_once:
            if not fresh:
                return
            assert self.consumer is not None, "the sink's consumer commits at-least-once"
            try:
                await self.consumer.commit({TopicPartition(*tp): off for tp, off in fresh.items()})
            except KafkaError as err:  # e.g. a rebalance in progress: the next loop retries
                log_event(log, "commit_failed", logging.WARNING, error=str(err)[:200])
                return
            self._committed.update(fresh)
            return
        for tp in sorted(self._open | (set(fresh) & set(self._tx))):
            producer = self._tx[tp]
            if _fenced(producer):  # its transaction is gone; it can begin no other
                self._open.discard(tp)
                self._settled(tp, False)
                raise ProducerFenced()
            if tp not in self._open:
                await producer.begin_transaction()
                self._open.add(tp)
            try:
                if tp in fresh:  # 3. the offsets join the outputs' transaction
                    await producer.send_offsets_to_transaction({TopicPartition(*tp): fresh[tp]}, self.group)
                self._open.discard(tp)
                await producer.commit_transaction()  # 4. visible together, or not at all
            except asyncio.CancelledError:
                self._open.discard(tp)  # its fate unknown: it is not reported either way
                raise
            except Exception:
                # Fenced, or the broker refused: the coordinator aborts it (at once when fenced,
                # else by the transaction timeout); nothing of it becomes visible.
                self._open.discard(tp)
                self._settled(tp, False)
                raise
            self._settled(tp, True)
            if tp in fresh:
                self._committed[tp] = fresh[tp]

    def _settled(self, tp: TopicPart, committed: bool) -> None:
        if self.on_settled is not None:
            self.on_settled(tp, committed)

    async def stop(self) -> None:
        for producer in self._tx.values():
            await producer.stop()
        self._tx.clear()
        if self._shared is not None:
            await self._shared.stop()
