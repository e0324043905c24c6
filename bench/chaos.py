"""`streamtts chaos`: a bounded steady load under a schedule of faults, counted by a subscriber
that shares no code path with the pipeline's own clients (a plain aiokafka read_committed
consumer of tts.results and the DLQs).

Faults, in turn, each followed by steady load: SIGKILL of the synthesize worker (restarted),
SIGKILL of the segment+encode+sink worker (restarted), SIGKILL of Kafka (restarted), the
front worker SIGKILLed and restarted with Kafka SIGKILLed as it starts its first stage
(`kafka_during_start`), MinIO stopped for a while, and a burst of poison and hostile records.
On a three-broker cluster (`--brokers 3`, CLUSTER_FAULTS): SIGKILL of the broker leading most
partitions of tts.requests (restarted, then back in every ISR), then of another one, leading
most of tts.pcm, briefly.
Counted per guarantee: sent (acknowledged by the broker), completed, failed, lost, duplicated
results, flipped results (`completed` then `failed`), dead letters, the longest a request took
from send to result (settle), and the longest it waited after the fault that delayed it ended
(or began, for a result that came while a later fault was still on).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer

from streamtts.bench.broker_faults import kill_broker, leader_with_most_partitions, wait_in_sync
from streamtts.bench.chaos_report import ChaosReport, FaultWindow
from streamtts.bench.result_observer import ResultObserver, sink_caught_up
from streamtts.bench.worker_procs import Topology, WorkerProc, WorkerSet
from streamtts.infra.local.stack import LocalStack
from streamtts.infra.topics import apply_topics, drop_topics
from streamtts.runtime.kafka import make_producer
from streamtts.runtime.settings import KafkaSettings, S3Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import TTSRequest

FAULTS = ("kill_synthesize", "kill_front", "kill_kafka", "kafka_during_start", "stop_minio", "poison")
CLUSTER_FAULTS = ("kill_requests_leader", "kill_pcm_leader")
"""For a multi-broker cluster: SIGKILL the leader of tts.requests, restart it, and once it is
back in every ISR, SIGKILL the leader of tts.pcm (another broker) briefly."""
TEXTS = (
    "Thank you for calling. How can I help you today?",
    "Your order has shipped and will arrive on Friday.",
    "Please hold while I transfer you to an agent.",
    "Your balance is forty two dollars and ten cents.",
)
Say = Callable[[str], None]


@dataclass(frozen=True)
class ChaosPlan:
    guarantee: str = "at_least_once"
    rate: float = 2.0
    """Requests per second of steady load (English, Piper: the pipeline keeps up)."""
    warmup_s: float = 6.0
    gap_s: float = 8.0
    """Steady load after each fault before the next one."""
    kafka_down_s: float = 3.0
    """How long a SIGKILLed broker stays down before it is restarted."""
    minio_down_s: float = 15.0
    poison: int = 10
    """Poison and hostile records in the poison fault."""
    drain_timeout_s: float = 180.0
    faults: tuple[str, ...] = FAULTS


async def steady_load(rate: float, send: Callable[[int], Coroutine[Any, Any, None]]) -> None:
    """`send(1)`, `send(2)`, … at `rate` per second until cancelled, each on a task of its own
    (open loop: a send waiting out an election does not hold up the next); the sends still
    running are awaited when it is cancelled."""
    pending: set[asyncio.Task[None]] = set()
    n = 0
    try:
        while True:
            n += 1
            task = asyncio.create_task(send(n))
            pending.add(task)
            task.add_done_callback(pending.discard)
            await asyncio.sleep(1.0 / rate)  # the load generator's own clock
    finally:
        await asyncio.gather(*pending, return_exceptions=True)


class ChaosRun:
    def __init__(
        self,
        stack: LocalStack,
        s3: S3Settings,
        plan: ChaosPlan,
        *,
        prefix: str,
        say: Say,
        log_dir: Path | None = None,
    ) -> None:
        self.stack = stack
        self.plan = plan
        self.say = say
        self.kafka = KafkaSettings(bootstrap_servers=stack.bootstrap, topic_prefix=prefix)
        self.topics = TopicNames(prefix)
        self.env = {
            **os.environ,
            "STREAMTTS_KAFKA_BOOTSTRAP": stack.bootstrap,
            "STREAMTTS_S3_ENDPOINT": s3.endpoint,
            "STREAMTTS_S3_ACCESS_KEY": s3.access_key,
            "STREAMTTS_S3_SECRET_KEY": s3.secret_key,
            "STREAMTTS_S3_BUCKET": s3.bucket,
            "STREAMTTS_TOPIC_PREFIX": prefix,
            "STREAMTTS_SESSION_TIMEOUT_S": "6",
        }
        self.workers = WorkerSet(
            Topology(guarantee=plan.guarantee, warm_voices=("en_joe",)), self.env, log_dir
        )
        self.report = ChaosReport(plan.guarantee)
        self.sent_at: dict[str, float] = {}
        self.poison_ids: list[str] = []
        self._producer: AIOKafkaProducer | None = None
        self._load: asyncio.Task[None] | None = None
        self._restarting = False
        self._killed_brokers: set[int] = set()

    # -- load ------------------------------------------------------------------------------
    async def _send(self, key: str, value: bytes) -> None:
        assert self._producer is not None
        try:
            await self._producer.send_and_wait(self.topics.requests, value, key=key.encode())
        except Exception as err:  # not acknowledged (broker down past the timeout): not "sent"
            self.say(f"[chaos] request {key} not acknowledged: {type(err).__name__}")
            return
        self.sent_at.setdefault(key, time.monotonic())

    async def _steady(self) -> None:
        async def send(n: int) -> None:
            req = TTSRequest.new(
                TEXTS[n % len(TEXTS)], request_id=f"chaos-{n:05d}", voice="en_joe", language="en"
            )
            await self._send(req.request_id, req.to_bytes())

        await steady_load(self.plan.rate, send)

    async def _supervise(self) -> None:
        """Restart a worker that exited on its own (the orchestrator's job), and count it."""
        while True:
            await asyncio.sleep(0.5)  # polling child processes
            if self._restarting:
                continue
            for proc in list(self.workers.procs):
                if proc.popen.poll() is not None:
                    self.report.unplanned_restarts += 1
                    self.say(f"[chaos] {proc.name} exited by itself ({proc.popen.returncode}); restarting")
                    await asyncio.to_thread(self.workers.respawn, proc.name)

    # -- faults ----------------------------------------------------------------------------
    def _proc(self, name: str) -> WorkerProc:
        return next(p for p in self.workers.procs if p.name == name)

    async def _kill(self, name: str) -> None:
        proc = self._proc(name)
        proc.popen.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.popen.wait)

    async def _kill_and_restart(self, name: str) -> None:
        self._restarting = True
        try:
            await self._kill(name)
            await asyncio.to_thread(self.workers.respawn, name)
        finally:
            self._restarting = False

    async def _kill_kafka(self) -> None:
        pid = self.stack.kafka.pid()
        assert pid is not None, "Kafka is not running"
        os.kill(pid, signal.SIGKILL)
        async with asyncio.timeout(30):
            while self.stack.kafka.pid() is not None:  # noqa: ASYNC110 - a foreign pid has no event
                await asyncio.sleep(0.1)
        await self._restart_after(self.plan.kafka_down_s, with_minio=False)

    async def _kafka_during_start(self, window: FaultWindow) -> None:
        """The front worker SIGKILLed and restarted, then Kafka SIGKILLed the moment it starts
        its first stage (restarted after `kafka_down_s`): start-up is a fault window too. The
        worker must ride it out (retry, then ready), not hang half-started nor exit."""
        self._restarting = True
        try:
            await self._kill("front")
            await asyncio.to_thread(self.workers.respawn, "front", wait=False)
            step = await asyncio.to_thread(self._proc("front").wait_step, "stage ", 90.0)
            if step is None:
                raise RuntimeError("the restarted front worker never began starting a stage")
            window.target = f"front at {step!r}"
            await self._kill_kafka()
            if not await asyncio.to_thread(self._proc("front").started.wait, 90.0):
                self.say("[chaos] the front worker did not finish starting within 90 s of Kafka's return")
        finally:
            self._restarting = False

    async def _kill_leader(self, topic: str, window: FaultWindow, spare: set[int]) -> None:
        """SIGKILL the broker leading most partitions of `topic` (none in `spare`), restart it
        after the outage, and return once every partition of this run is fully replicated
        again (so the next fault cannot take a second replica of any of them)."""
        node_id = await leader_with_most_partitions(self.kafka, topic, exclude=spare)
        spare.add(node_id)
        window.target = f"kafka-{node_id}"
        await kill_broker(self.stack, node_id)
        await self._restart_after(self.plan.kafka_down_s, with_minio=False)
        await wait_in_sync(self.kafka, self.topics)

    async def _stop_minio(self) -> None:
        await asyncio.to_thread(self.stack.minio.stop)
        await self._restart_after(self.plan.minio_down_s)

    async def _restart_after(self, down_s: float, *, with_minio: bool = True) -> None:
        """The outage itself (`down_s`), then the local stack started again, quietly."""
        await asyncio.sleep(down_s)
        await asyncio.to_thread(self.stack.up, lambda _m: None, with_minio=with_minio)

    async def _poison(self) -> None:
        hostile = [
            b"{not json",
            b'{"schema_version":1,"request_id":"x","text":"\xff"}',
            orjson.dumps(
                {"schema_version": 1, "request_id": "chaos-p", "text": "hi", "voice": "jm_kumo:0.7\n+a:0.3"}
            ),
            orjson.dumps({"schema_version": 1, "request_id": "chaos-p", "text": "x" * 300_000}),
            b'{"schema_version":1,"request_id":"chaos-p","text":"hi","delivery":{"reply_topic":"tts.results"}}',
        ]
        for i in range(self.plan.poison):
            key = f"chaos-poison-{i:03d}"
            self.poison_ids.append(key)
            await self._send(key, hostile[i % len(hostile)])

    async def _fault(self, name: str) -> None:
        window = FaultWindow(name, time.monotonic())
        self.say(f"[chaos] {self.plan.guarantee}: {name}")
        if name == "kill_synthesize":
            await self._kill_and_restart("synth1")
        elif name == "kill_front":
            await self._kill_and_restart("front")
        elif name == "kill_kafka":
            await self._kill_kafka()
        elif name == "kafka_during_start":
            await self._kafka_during_start(window)
        elif name == "stop_minio":
            await self._stop_minio()
        elif name == "poison":
            await self._poison()
        elif name == "kill_requests_leader":
            await self._kill_leader(self.topics.requests, window, self._killed_brokers)
        elif name == "kill_pcm_leader":
            await self._kill_leader(self.topics.pcm, window, self._killed_brokers)
        else:
            raise ValueError(f"unknown fault {name!r}; faults are {', '.join(FAULTS + CLUSTER_FAULTS)}")
        window.ended = time.monotonic()
        self.report.faults.append(window)

    # -- run -------------------------------------------------------------------------------
    async def run(self) -> ChaosReport:
        started = time.monotonic()
        await apply_topics(self.kafka)
        await asyncio.to_thread(self.workers.start)
        observer = ResultObserver(self.kafka, self.topics)
        await observer.start()
        self._producer = make_producer(self.kafka)  # idempotent, acks=all, rides out an election
        await self._producer.start()
        supervisor = asyncio.create_task(self._supervise())
        try:
            self._load = asyncio.create_task(self._steady())
            await asyncio.sleep(self.plan.warmup_s)  # steady load before the first fault
            for name in self.plan.faults:
                await self._fault(name)
                await asyncio.sleep(self.plan.gap_s)  # steady load between faults
            self._load.cancel()
            await asyncio.gather(self._load, return_exceptions=True)
            await self._drain(observer)
        finally:
            supervisor.cancel()
            await asyncio.gather(supervisor, return_exceptions=True)
            if self._load and not self._load.done():
                self._load.cancel()
            await self._producer.stop()
            await observer.stop()
            await asyncio.to_thread(self.workers.stop)
        self.report.tally(self.sent_at, self.poison_ids, observer.results, observer.dead_letters)
        self.report.duration_s = time.monotonic() - started
        await self._clean_up()
        return self.report

    async def _clean_up(self) -> None:
        """Delete the run's single-use topics, unless the run lost, duplicated or flipped
        something or did not drain: then they are what explains it (kcat, replay)."""
        r = self.report
        if r.lost or r.duplicate_results or r.flips or r.drain_timed_out:
            self.say(f"[chaos] kept the run's topics for inspection: {self.kafka.topic_prefix}*")
        elif error := await drop_topics(self.kafka):
            self.say(f"[chaos] could not delete the run's topics: {error}")

    async def _drain(self, observer: ResultObserver) -> None:
        good = [k for k in self.sent_at if k not in self.poison_ids]
        try:
            async with asyncio.timeout(self.plan.drain_timeout_s):
                while True:
                    done = all(k in observer.results for k in good)
                    if done and await sink_caught_up(self.kafka, self.topics):
                        break
                    await asyncio.sleep(0.5)  # polling an external system's progress
        except TimeoutError:
            self.report.drain_timed_out = True
            missing = [k for k in good if k not in observer.results]
            self.say(f"[chaos] drain timed out; {len(missing)} without a result, e.g. {missing[:5]}")
        # One more read to the end of tts.results: anything the sink committed is now visible.
        try:
            async with asyncio.timeout(30):
                await observer.read_to_end()
        except TimeoutError:  # a duplicate or a flip could hide past here: the run does not count
            self.report.drain_timed_out = True
            self.say("[chaos] the subscriber did not read to the end of the results within 30 s")
