"""The lexicon book without Kafka: version tombstones drop kept versions, only the last
record of a key in a batch is parsed, an oversized record is refused unparsed, and parsing
runs off the event loop."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from streamtts.features.lexicons import book as book_module
from streamtts.features.lexicons.book import LexiconBook, parse_record
from streamtts.features.lexicons.store import superseded
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas import ContractError, Lexicon, LexiconEntry
from streamtts.schemas.lexicon import MAX_LEXICON_BYTES, version_key


def _lexicon(version: int, tenant: str = "acme") -> bytes:
    entry = LexiconEntry(grapheme="Zorvex", alias=f"Acme version {version}", language="en")
    return Lexicon(tenant=tenant, version=version, entries=[entry], updated_at=datetime.now(UTC)).to_bytes()


def _record(key: str, value: bytes | None) -> SimpleNamespace:
    return SimpleNamespace(key=key.encode(), value=value, timestamp=None)


@pytest.fixture
async def book() -> AsyncIterator[LexiconBook]:
    found = LexiconBook(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "tts.lexicons")
    yield found
    await found.stop()  # its consumer was never started: closing it costs nothing


async def test_a_version_tombstone_drops_the_kept_version(book: LexiconBook) -> None:
    await book._take_batch([_record(version_key("acme", v), _lexicon(v)) for v in (1, 2, 3)])
    await book._take_batch([_record("acme", _lexicon(3))])
    assert book.version("acme", 1) is not None
    await book._take_batch([_record(version_key("acme", 1), None)])
    assert book.version("acme", 1) is None
    assert book.version("acme", 2) is not None and book.current("acme").version == 3  # type: ignore[union-attr]


async def test_only_the_last_record_of_a_key_in_a_batch_is_parsed(
    book: LexiconBook, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[tuple[str, str]] = []
    real = book_module.parse_record

    def counting(key: str, value: bytes) -> Lexicon:
        parsed.append((key, threading.current_thread().name))
        return real(key, value)

    monkeypatch.setattr(book_module, "parse_record", counting)
    # At start: a version written, then superseded (tombstoned), and the current pointer 3 times.
    records = [
        _record(version_key("acme", 1), _lexicon(1)),
        _record("acme", _lexicon(1)),
        _record("acme", _lexicon(2)),
        _record(version_key("acme", 1), None),
        _record("acme", _lexicon(3)),
    ]
    await book._take_batch(records)  # type: ignore[arg-type]
    assert [k for k, _ in parsed] == ["acme"]
    assert book.current("acme").version == 3  # type: ignore[union-attr]
    assert book.version("acme", 1) is None and book.updates == len(records)
    # Off the event loop: the parse ran in another thread.
    assert parsed[0][1] != threading.current_thread().name


async def test_an_oversized_record_is_refused_unparsed_and_the_previous_one_stays(
    book: LexiconBook, caplog: pytest.LogCaptureFixture
) -> None:
    await book._take_batch([_record("acme", _lexicon(1))])  # type: ignore[list-item]
    huge = b"{" + b" " * MAX_LEXICON_BYTES + b"}"
    with pytest.raises(ContractError, match="not read"):
        parse_record("acme", huge)
    await book._take_batch([_record("acme", huge)])  # type: ignore[list-item]
    assert book.current("acme").version == 1  # type: ignore[union-attr]
    [line] = [r for r in caplog.records if r.getMessage() == "lexicon_invalid"]
    assert "the limit is" in line.error and "not read" in line.error  # type: ignore[attr-defined]


def test_superseded_versions_are_those_past_the_kept_history() -> None:
    assert superseded([1, 2, 3], keep=16) == []
    assert superseded(list(range(1, 21)), keep=16) == [1, 2, 3, 4]
    assert superseded([5, 1, 3], keep=2) == [1]
