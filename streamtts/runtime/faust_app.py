"""faust-streaming app factory: one app (= one consumer group) per stage.

Stages carry no faust state (every message carries its request context), so apps need no
tables, no faust changelogs and no leader topic (the segment stage keeps its streamed
utterances' state on a topic of its own, `tts.utterances`: see `segment.utterances`);
topics are created by `streamtts topics apply`, never here.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any

import faust
from faust.tables import TableManager
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import ProducerT
from mode.utils.futures import StampedeWrapper
from mode.utils.objects import cached_property

from streamtts.runtime.kafka import faust_credentials
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings


class IdempotentProducer(faust_aiokafka.Producer):
    """faust's aiokafka producer, idempotent under every guarantee (faust makes it so only in
    transactions): a send retried after a leader election is written once and in order, not
    once per attempt. Its batches are retried for `producer_request_timeout` (faust's default
    20 min), far longer than an election takes."""

    def _settings_extra(self) -> Mapping[str, Any]:
        return {"acks": "all", "enable_idempotence": True}


class IdempotentTransport(faust_aiokafka.Transport):
    Producer = IdempotentProducer


class StageApp(faust.App):
    """A faust app whose sends do not yield to the loop once its producer runs.

    faust guards `maybe_start_producer`, which every `Topic.send` awaits, with mode's
    `stampede`, and that sleeps(0) three times per call. So every send gave the loop three
    turns, and the producer's sender took the first record alone: a chunk's audio and its
    file part, written one after the other, went as two produce requests (measured:
    never one). Here a started producer is returned at once, and only a first call goes
    through faust's stampede-guarded start."""

    async def maybe_start_producer(self) -> ProducerT:
        if self.in_transaction:
            return self.consumer.transactions
        producer = self.producer
        if producer.started:
            return producer
        return await self._start_producer_once()

    @cached_property
    def _start_producer_once(self) -> StampedeWrapper:
        return StampedeWrapper(faust.App.maybe_start_producer.__wrapped__, self)


class TablelessManager(TableManager):
    """faust's table manager, without its start-up nap: faust sleeps 1 s before it looks for
    tables (so agents started late can still add one), and the consumer subscribes only after.
    A stage declares no tables, so the nap was a second of every stage's group join (three
    seconds of a front worker's start, its stages starting one after another)."""

    async def on_start(self) -> None:
        if self:  # a table after all: faust's own start, nap included
            await super().on_start()
        elif not self.should_stop:
            await self._update_channels()
            await self.recovery.start()


def group_id(kafka: KafkaSettings, stage: str) -> str:
    return f"{kafka.topic_prefix}streamtts-{stage}"


def _faust_dir() -> str:
    path = os.path.join(tempfile.gettempdir(), "streamtts-faust")
    os.makedirs(path, exist_ok=True)  # faust creates only the last level
    return path


def make_app(stage: str, kafka: KafkaSettings, pipeline: PipelineSettings, **overrides: Any) -> faust.App:
    """A faust app for one stage. Its id is the stage's consumer group."""
    brokers = [f"kafka://{b.strip()}" for b in kafka.bootstrap_servers.split(",")]
    conf: dict[str, Any] = dict(
        broker=brokers,
        broker_credentials=faust_credentials(kafka),
        value_serializer="raw",
        key_serializer="raw",
        store="memory://",
        # faust writes an (unused: memory store) `<app>-data/` folder; not into the cwd.
        datadir=os.path.join(_faust_dir(), "{conf.name}"),
        topic_allow_declare=False,
        topic_disable_leader=True,
        web_enabled=False,
        processing_guarantee=pipeline.delivery.processing_guarantee,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=pipeline.delivery.session_timeout_s,
        consumer_metadata_max_age_ms=int(pipeline.delivery.metadata_refresh_s * 1000),
        broker_heartbeat_interval=1.0,
        broker_commit_interval=1.0,
        # Long inference must not look like a dead consumer; heartbeats run on the loop.
        broker_max_poll_interval=600.0,
        producer_acks=-1,
        producer_max_request_size=4 * 1024 * 1024,
        consumer_max_fetch_size=4 * 1024 * 1024,
        # Bounded buffer between fetcher and agent: a busy stage stops fetching (back-pressure).
        stream_buffer_maxsize=64,
        stream_wait_empty=False,
        # Cancelled handling must never count as done (see FaustStage._agent: manual acks).
        stream_ack_cancelled_tasks=False,
        logging_config=None,
        loghandlers=[],
        TableManager=TablelessManager,
    )
    conf.update(overrides)
    app = StageApp(group_id(kafka, stage), **conf)
    # Before anything asks for it: the app builds its transport (and so producers) lazily.
    app.transport = IdempotentTransport(app.conf.broker_consumer, app)
    return app
