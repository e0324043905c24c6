"""Contracts out of a consumer's `getmany` batch, for readers of topics others write."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

from aiokafka import ConsumerRecord, TopicPartition

from streamtts.schemas import ContractError, wire
from streamtts.schemas.base import Contract

C = TypeVar("C", bound=Contract)


def parsed(batch: Mapping[TopicPartition, Sequence[ConsumerRecord]], contract: type[C]) -> Iterator[C]:
    """The record values of `batch` that parse as `contract`, partition by partition in offset
    order. One that does not (malformed, a tombstone) is skipped: a reader of a shared topic is
    not where its records are judged."""
    for records in batch.values():
        for record in records:
            try:
                yield wire.decode(contract, record.value, record.headers)
            except ContractError:
                continue
