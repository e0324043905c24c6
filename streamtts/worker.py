"""Run pipeline stages in this process: all of them (local default) or a chosen few.

Several processes running the same stage share its work through the stage's consumer group.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Sequence
from typing import Protocol

from streamtts.jsonlog import log_event
from streamtts.settings import PipelineSettings, Settings
from streamtts.topics import TopicNames

STAGE_NAMES: tuple[str, ...] = ("segment", "synthesize", "encode", "sink")
log = logging.getLogger("streamtts.worker")


class Service(Protocol):
    name: str

    async def start(self) -> None: ...
    async def stop(self) -> None: ...


class Worker:
    """Owns the stage services of one process; starts them downstream-first, stops upstream-first."""

    def __init__(
        self,
        stages: Sequence[str],
        settings: Settings,
        pipeline: PipelineSettings,
        *,
        renderer: object | None = None,
        sink_namespace: str = "",
    ) -> None:
        unknown = [s for s in stages if s not in STAGE_NAMES]
        if unknown:
            from streamtts.errors import ConfigError

            raise ConfigError(f"unknown stage {unknown[0]!r}; stages are {', '.join(STAGE_NAMES)}")
        self.stages = [s for s in STAGE_NAMES if s in stages]
        self.settings = settings
        self.pipeline = pipeline
        self.topics = TopicNames(settings.kafka.topic_prefix)
        self._renderer = renderer
        self._sink_namespace = sink_namespace
        self.services: list[Service] = []

    async def start(self) -> None:
        started = time.perf_counter()
        if "synthesize" in self.stages and self._renderer is None:
            from processors.synthesize.speech_stack import build_renderer

            # Model load + warm-up is CPU-bound: keep the loop free while it runs.
            self._renderer = await asyncio.to_thread(build_renderer, self.pipeline)
        kafka, pipe = self.settings.kafka, self.pipeline
        # Downstream first: when the segment stage starts emitting, its consumers are there.
        for stage in reversed(self.stages):
            service: Service
            if stage == "sink":
                from sinks.completion_sink import CompletionSink

                service = CompletionSink(
                    kafka, self.settings.s3, pipe, self.topics, namespace=self._sink_namespace
                )
            elif stage == "encode":
                from processors.encode.stage import EncodeStage

                service = EncodeStage(kafka, pipe, self.topics)
            elif stage == "synthesize":
                from processors.synthesize.stage import SynthesizeStage

                service = SynthesizeStage(kafka, pipe, self._renderer, self.topics)  # type: ignore[arg-type]
            else:
                from processors.segment.stage import SegmentStage

                service = SegmentStage(kafka, pipe, self.topics)
            await service.start()
            self.services.append(service)
            log_event(log, "stage_started", stage=stage)
        log_event(
            log,
            "worker_started",
            stages=self.stages,
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    async def stop(self) -> None:
        # Upstream first: stop taking new work, let downstream drain what is in flight.
        for service in reversed(self.services):
            try:
                await service.stop()
            except Exception as err:  # keep stopping the others
                log_event(
                    log,
                    "stage_stop_failed",
                    logging.ERROR,
                    stage=service.name,
                    error=str(err)[:200],
                )
        self.services.clear()
        log_event(log, "worker_stopped", stages=self.stages)

    def service(self, name: str) -> Service:
        return next(s for s in self.services if s.name == name)


async def run_until_signalled(worker: Worker) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await worker.start()
    try:
        await stop.wait()
    finally:
        log_event(log, "shutdown_requested")
        await worker.stop()
