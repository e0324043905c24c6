"""Tenant lexicons as every segment stage sees them: one reader of `tts.lexicons` per worker.

The topic is compacted: key `TENANT` is the current lexicon (a null value deletes it), key
`TENANT@vN` keeps version N (a null value: superseded, see `schemas.lexicon`). It is read
whole — no consumer group — from the beginning and followed live, so an update reaches every
running worker within one poll (~0.5 s) and the next request uses it; no restart. The stage
asks `current(tenant)` or `version(tenant, n)`: dict lookups on its hot path.

Records are parsed off the event loop (a 2 MiB lexicon is about a second of parsing), only
the last record of each key in a batch is parsed (at start, a version written and then
superseded is skipped), and a record over `MAX_LEXICON_BYTES` is refused unparsed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from aiokafka import ConsumerRecord

from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topic_follower import TopicFollower
from streamtts.schemas import ContractError, Lexicon
from streamtts.schemas.lexicon import HISTORY_VERSIONS, MAX_LEXICON_BYTES

log = logging.getLogger("streamtts.lexicons")


class LexiconBook(TopicFollower):
    """Current lexicon per tenant, plus the last `history` versions of each (for replays
    that name a version)."""

    what = "lexicon"

    def __init__(self, kafka: KafkaSettings, topic: str, *, history: int = HISTORY_VERSIONS) -> None:
        super().__init__(kafka, topic, poll_ms=200, log=log, name="lexicon-book")
        self.history = history
        self._current: dict[str, Lexicon] = {}
        self._versions: dict[str, OrderedDict[int, Lexicon]] = {}
        self.updates = 0
        """Records applied so far."""
        self._changed = asyncio.Condition()
        self.listeners: list[Callable[[Lexicon], object]] = []
        """Called with each new current lexicon (the segment stage compiles it ahead of use)."""
        self.delay_ms: dict[str, float] = {}
        """Per tenant: from the current lexicon's write (record timestamp) to its use here."""

    def current(self, tenant: str) -> Lexicon | None:
        return self._current.get(tenant)

    def version(self, tenant: str, version: int) -> Lexicon | None:
        current = self._current.get(tenant)
        if current is not None and current.version == version:
            return current
        return self._versions.get(tenant, OrderedDict()).get(version)

    async def wait_until(self, check: Callable[[LexiconBook], bool]) -> None:
        """Return once `check(self)` holds (re-checked after every record read)."""
        async with self._changed:
            await self._changed.wait_for(lambda: check(self))

    def apply(self, key: str, value: bytes | None, written_ms: int | None = None) -> None:
        """One record of the topic: a current lexicon, a kept version, or a deletion (parsed
        here; `_take_batch` parses off the loop, then `take`s).

        written_ms: the record's timestamp; how long it took to get here is logged and kept
        (`delay_ms`), the measure of "a lexicon update reaches every worker within …".
        """
        self.take(key, parse_record(key, value) if value is not None else None, written_ms)

    def take(self, key: str, lexicon: Lexicon | None, written_ms: int | None = None) -> None:
        """A parsed record (`parse_record`): None is a tombstone."""
        tenant, _, kept = key.partition("@v")
        if lexicon is None:
            if not kept:
                self._current.pop(tenant, None)
                log_event(log, "lexicon_deleted", tenant=tenant)
            elif kept.isdigit():  # a superseded version: compaction removes it; so do we
                self._versions.get(tenant, OrderedDict()).pop(int(kept), None)
            return
        versions = self._versions.setdefault(tenant, OrderedDict())
        versions[lexicon.version] = lexicon
        while len(versions) > self.history:  # the oldest versions go, whatever order they came in
            versions.pop(min(versions))
        if not kept:
            self._current[tenant] = lexicon
            for listener in self.listeners:
                listener(lexicon)
            delay = round(time.time() * 1000 - written_ms, 1) if written_ms is not None else None
            if delay is not None:
                self.delay_ms[tenant] = delay
            log_event(
                log,
                "lexicon_loaded",
                tenant=tenant,
                version=lexicon.version,
                entries=len(lexicon.entries),
                delay_ms=delay,
            )

    async def _take_batch(self, records: list[ConsumerRecord]) -> None:
        last: dict[str, ConsumerRecord] = {}  # the last record of each key, in their order
        for record in records:
            key = record.key.decode("utf-8", "replace") if record.key else ""
            last.pop(key, None)
            last[key] = record
        for key, record in last.items():
            try:
                lexicon = (
                    await asyncio.to_thread(parse_record, key, record.value)
                    if record.value is not None
                    else None
                )
                self.take(key, lexicon, record.timestamp)
            except ContractError as err:  # never half-apply: the previous one stays
                log_event(log, "lexicon_invalid", logging.WARNING, key=key[:80], error=str(err)[:200])
        self.updates += len(records)
        async with self._changed:
            self._changed.notify_all()


def parse_record(key: str, value: bytes) -> Lexicon:
    """The lexicon a record of key `key` holds.

    Raises:
        ContractError: not a lexicon, another tenant's, or over `MAX_LEXICON_BYTES` (refused
            before parsing: a worker never spends longer on a record than its size allows).
    """
    if len(value) > MAX_LEXICON_BYTES:
        raise ContractError(
            "lexicon", "", "too_large", f"{len(value)} bytes; the limit is {MAX_LEXICON_BYTES} (not read)"
        )
    lexicon = Lexicon.from_bytes(value)
    tenant = key.partition("@v")[0]
    if lexicon.tenant != tenant:
        raise ContractError("lexicon", "tenant", "mismatch", f"key {key!r} holds tenant {lexicon.tenant!r}")
    return lexicon
