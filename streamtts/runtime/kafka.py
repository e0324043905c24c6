"""The one place Kafka clients are built, so every component gets the same safe defaults and
the same credentials: aiokafka clients here, faust apps through `faust_credentials`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.client import AIOKafkaClient
from aiokafka.partitioner import DefaultPartitioner

from streamtts.runtime.settings import KafkaSettings

SSL_PROTOCOLS = ("SSL", "SASL_SSL")
DELIVERY_TIMEOUT_MS = 60_000
"""How long a producer retries a batch (aiokafka's `request_timeout_ms` is Kafka's
`delivery.timeout.ms` too): a SIGKILLed leader is replaced after the broker session timeout
(9 s) plus a metadata refresh, and a controller failover adds seconds; 60 s rides out more than
one election in a row, and still fails a send to a cluster that is really gone within a minute."""


def _ssl_context(kafka: KafkaSettings) -> Any:
    from aiokafka.helpers import create_ssl_context

    return create_ssl_context(cafile=kafka.ssl_cafile)


def client_kwargs(kafka: KafkaSettings) -> dict[str, Any]:
    """Connection and security arguments common to aiokafka producers, consumers and admins."""
    kwargs: dict[str, Any] = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "security_protocol": kafka.security_protocol,
    }
    if kafka.sasl_mechanism:
        kwargs.update(
            sasl_mechanism=kafka.sasl_mechanism,
            sasl_plain_username=kafka.sasl_username,
            sasl_plain_password=kafka.sasl_password,
        )
    if kafka.security_protocol in SSL_PROTOCOLS:
        kwargs["ssl_context"] = _ssl_context(kafka)
    return kwargs


def faust_credentials(kafka: KafkaSettings) -> Any:
    """The same security for a faust app. faust derives the protocol from the credentials:
    SASL credentials without an SSL context mean SASL_PLAINTEXT, so SASL_SSL must carry one."""
    import faust

    ssl = _ssl_context(kafka) if kafka.security_protocol in SSL_PROTOCOLS else None
    if kafka.sasl_mechanism:
        return faust.SASLCredentials(
            username=kafka.sasl_username,
            password=kafka.sasl_password,
            mechanism=kafka.sasl_mechanism,
            ssl_context=ssl,
        )
    if ssl is not None:
        return faust.SSLCredentials(ssl)
    return None


def make_producer(
    kafka: KafkaSettings, *, transactional_id: str | None = None, **overrides: Any
) -> AIOKafkaProducer:
    """An idempotent, acks=all producer: retries can neither lose nor duplicate records, and
    they go on long enough (DELIVERY_TIMEOUT_MS) to outlast a leader election. With the
    replicated topic profile (min.insync.replicas=2) an acknowledged record is on two brokers."""
    kwargs: dict[str, Any] = dict(
        client_kwargs(kafka),
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
        max_request_size=4 * 1024 * 1024,
        request_timeout_ms=DELIVERY_TIMEOUT_MS,
    )
    if transactional_id:
        kwargs["transactional_id"] = transactional_id
    kwargs.update(overrides)
    return AIOKafkaProducer(**kwargs)


def make_consumer(
    kafka: KafkaSettings, *topics: str, group_id: str | None, **overrides: Any
) -> AIOKafkaConsumer:
    """A consumer that commits explicitly (after its output is acknowledged)."""
    kwargs: dict[str, Any] = dict(
        client_kwargs(kafka),
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_partition_fetch_bytes=4 * 1024 * 1024,
        fetch_max_bytes=16 * 1024 * 1024,
    )
    kwargs.update(overrides)
    return AIOKafkaConsumer(*topics, **kwargs)


def make_client(kafka: KafkaSettings, **overrides: Any) -> AIOKafkaClient:
    """A bare client (requests of our own choosing, e.g. a metadata request for no topic)."""
    kwargs = dict(client_kwargs(kafka), request_timeout_ms=15000)
    kwargs.update(overrides)
    return AIOKafkaClient(**kwargs)


def make_admin(kafka: KafkaSettings, **overrides: Any) -> AIOKafkaAdminClient:
    kwargs = dict(client_kwargs(kafka), request_timeout_ms=15000)
    kwargs.update(overrides)
    return AIOKafkaAdminClient(**kwargs)


@contextlib.asynccontextmanager
async def started_admin(kafka: KafkaSettings) -> AsyncIterator[AIOKafkaAdminClient]:
    """A short-lived admin client for a few calls: started here, closed when the block ends."""
    admin = make_admin(kafka)
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


async def describe_partitions(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, set[int]]:
    """Partition ids of each existing topic in `topics`, from fresh cluster metadata."""
    described = await admin.describe_topics(topics)
    return {t["topic"]: {p["partition"] for p in t["partitions"]} for t in described if t["error_code"] == 0}


def key_partition(key: bytes, partitions: Iterable[int]) -> int:
    """The partition a record keyed `key` goes to among `partitions` (the topic's, all of
    them), as every producer here and faust's map it: murmur2 of the key."""
    ordered = sorted(partitions)
    return int(DefaultPartitioner()(key, ordered, ordered))


async def topic_partitions(kafka: KafkaSettings, topic: str) -> set[int]:
    """Partition ids of `topic` (empty if it does not exist), with a short-lived admin client."""
    async with started_admin(kafka) as admin:
        return (await describe_partitions(admin, [topic])).get(topic, set())


async def partitions_of(kafka: KafkaSettings, topics: Iterable[str]) -> list[TopicPartition]:
    """Every partition of `topics`, topic by topic in partition order (a missing topic: none)."""
    tps: list[TopicPartition] = []
    for topic in topics:
        tps += [TopicPartition(topic, p) for p in sorted(await topic_partitions(kafka, topic))]
    return tps


async def attach_at_end(consumer: AIOKafkaConsumer, tps: list[TopicPartition]) -> None:
    """Assign `tps` to a group-less consumer at their end, resolved now (`position()` forces
    the lookup): "end" means the end before the caller sends anything, not whenever the first
    fetch happens, so no reply to a request sent after this returns is missed."""
    consumer.assign(tps)
    await consumer.seek_to_end(*tps)
    for tp in tps:
        await consumer.position(tp)
