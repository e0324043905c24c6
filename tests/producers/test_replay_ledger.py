"""The replay ledger and producer every replay shares: loaded before, stopped after."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from streamtts.producers.replay import ledger as ledger_module
from streamtts.producers.replay.ledger import ReplayLedger, ledger_and_producer
from streamtts.producers.replay.options import ReplayOptions
from streamtts.runtime.settings import KafkaSettings


class FakeProducer:
    def __init__(self) -> None:
        self.events: list[str] = []

    async def start(self) -> None:
        self.events.append("start")

    async def stop(self) -> None:
        self.events.append("stop")


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> FakeProducer:
    producer = FakeProducer()

    async def snapshot(kafka: Any, topic: str) -> AsyncIterator[SimpleNamespace]:
        assert topic == "tts.replay.ledger"
        yield SimpleNamespace(key=b"a", value=b"{}")
        yield SimpleNamespace(key=b"b", value=b"{}")
        yield SimpleNamespace(key=b"a", value=None)  # a tombstone forgets "a"
        yield SimpleNamespace(key=None, value=b"{}")

    monkeypatch.setattr(ledger_module, "snapshot", snapshot)
    monkeypatch.setattr(ledger_module, "make_producer", lambda kafka: producer)
    return producer


async def test_ledger_is_loaded_and_producer_stopped_on_exit(fakes: FakeProducer) -> None:
    async with ledger_and_producer(KafkaSettings(), "tts.replay.ledger") as (ledger, producer):
        assert producer is fakes and fakes.events == ["start"]
        assert ledger.done == {"b"} and ledger.seen("b") and not ledger.seen("a")
    assert fakes.events == ["start", "stop"]


async def test_producer_is_stopped_when_the_replay_fails(fakes: FakeProducer) -> None:
    with pytest.raises(RuntimeError):
        async with ledger_and_producer(KafkaSettings(), "tts.replay.ledger"):
            raise RuntimeError("broker gone")
    assert fakes.events == ["start", "stop"]


def test_what_the_ledger_has_is_skipped_unless_forced() -> None:
    ledger = ReplayLedger(KafkaSettings(), "tts.replay.ledger")
    ledger.done.add("done")
    plain, forced = ReplayOptions(), ReplayOptions(force=True)
    summary = plain.summary()
    assert plain.already_replayed(ledger, "done", summary)
    assert not plain.already_replayed(ledger, "new", summary)
    assert not forced.already_replayed(ledger, "done", summary)
    assert summary.skipped == {"already_replayed": 1}
