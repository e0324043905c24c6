"""Lexicon history that compaction can remove: each put tombstones the versions past the
kept history, a worker's book starting afterwards holds only the kept ones, and keys of the
old format (every `TENANT@vN` kept) are read and cleaned up by the next put."""

from __future__ import annotations

import asyncio

import pytest

from streamtts.features.lexicons.book import LexiconBook
from streamtts.features.lexicons.store import LexiconStore
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import LexiconEntry
from streamtts.schemas.lexicon import version_key

pytestmark = [pytest.mark.integration]


def _entries(n: int) -> list[LexiconEntry]:
    return [LexiconEntry(grapheme="Zorvex", alias=f"Acme version {n}", language="en")]


async def test_superseded_versions_are_tombstoned_and_not_read_again(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    # Three versions written the old way (every version kept), then two puts keeping two.
    old_writer = LexiconStore(kafka_settings, topics.lexicons, keep=1_000_000)
    for n in range(1, 4):
        await old_writer.put("acme", _entries(n))
    store = LexiconStore(kafka_settings, topics.lexicons, keep=2)
    for n in range(4, 6):
        assert (await store.put("acme", _entries(n))).version == n
    latest = await store.read()
    assert {v: latest[version_key("acme", v)] is not None for v in range(1, 6)} == {
        1: False, 2: False, 3: False, 4: True, 5: True,
    }  # fmt: skip
    book = LexiconBook(kafka_settings, topics.lexicons)
    await book.start()
    try:
        async with asyncio.timeout(30):
            await book.caught_up.wait()
        assert book.current("acme").version == 5  # type: ignore[union-attr]
        assert [v for v in range(1, 6) if book.version("acme", v) is not None] == [4, 5]
    finally:
        await book.stop()
    # Numbers never repeat: the next version is 6 although 1–3 are gone.
    assert (await store.put("acme", _entries(6))).version == 6
