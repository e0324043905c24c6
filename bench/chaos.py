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
from send to result (settle), and the longest it waited after the fault that delayed it ended.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Collection, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer, TopicPartition

from streamtts.bench.tables import markdown_rows
from streamtts.bench.worker_procs import Topology, WorkerProc, WorkerSet
from streamtts.infra.local import processes
from streamtts.infra.local.stack import LocalStack
from streamtts.infra.topics import apply_topics
from streamtts.runtime.faust_app import group_id
from streamtts.runtime.kafka import describe_partitions, make_consumer, make_producer, started_admin
from streamtts.runtime.settings import KafkaSettings, S3Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import TTSRequest
from streamtts.schemas.names import STAGES

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


@dataclass
class FaultWindow:
    name: str
    started: float
    ended: float = 0.0
    target: str = ""
    """What the fault hit, when the plan does not say (the broker that led the partitions)."""

    @property
    def label(self) -> str:
        return f"{self.name} ({self.target})" if self.target else self.name


@dataclass
class ChaosReport:
    guarantee: str
    sent: int = 0
    completed: int = 0
    failed: int = 0
    lost: int = 0
    duplicate_results: int = 0
    flips: int = 0
    dead_letters: int = 0
    poison_sent: int = 0
    poison_dead_lettered: int = 0
    longest_wait_after_fault_s: float = 0.0
    longest_settle_s: float = 0.0
    """The longest any request took from acknowledged send to its first result."""
    wait_after: dict[str, float] = field(default_factory=dict)
    """Per fault: the longest a request waited after that fault ended (it was the last one
    before the request's result). For `poison`, what hostile records cost the others."""
    faults: list[FaultWindow] = field(default_factory=list)
    duration_s: float = 0.0
    unplanned_restarts: int = 0
    """Worker processes that exited by themselves (a dead stage loop) and were restarted, as
    an orchestrator would."""
    drain_timed_out: bool = False
    """Not every request had a result (or the sink had not committed to the end) in time."""

    def row(self) -> dict[str, object]:
        return {
            "guarantee": self.guarantee,
            "sent": self.sent,
            "completed": self.completed,
            "failed": self.failed,
            "lost": self.lost,
            "duplicate results": self.duplicate_results,
            "flips": self.flips,
            "dead letters (poison)": f"{self.poison_dead_lettered}/{self.poison_sent}",
            "dead letters (all)": self.dead_letters,
            "longest settle s": round(self.longest_settle_s, 1),
            "longest wait after a fault s": round(self.longest_wait_after_fault_s, 1),
            "longest wait by fault s": ", ".join(f"{k} {v:.1f}" for k, v in self.wait_after.items()),
            "unplanned restarts": self.unplanned_restarts,
            "drained": not self.drain_timed_out,
            "faults s": ", ".join(f"{f.label} {f.ended - f.started:.1f}" for f in self.faults),
        }


class ResultObserver:
    """The independent subscriber: results and dead letters as a read_committed client sees them."""

    def __init__(self, kafka: KafkaSettings, topics: TopicNames) -> None:
        self.results: dict[str, list[tuple[str, float]]] = {}
        self.dead_letters: dict[str, int] = {}
        self._consumer = make_consumer(
            kafka, topics.results, *(topics.dlq(s) for s in STAGES), group_id=None, request_timeout_ms=10_000
        )
        self._topics = topics
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._consumer.start()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                batch = await self._consumer.getmany(timeout_ms=500)
            except Exception:  # the broker is down: this client reconnects by itself
                await asyncio.sleep(0.5)
                continue
            now = time.monotonic()
            for tp, records in batch.items():
                for r in records:
                    key = (r.key or b"").decode(errors="replace")
                    if tp.topic == self._topics.results:
                        status = orjson.loads(r.value or b"{}").get("status", "?")
                        self.results.setdefault(key, []).append((status, now))
                    else:
                        self.dead_letters[key] = self.dead_letters.get(key, 0) + 1

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._consumer.stop()


async def sink_caught_up(kafka: KafkaSettings, topics: TopicNames) -> bool:
    """The sink group has committed everything on tts.pcm: no result can still be on its way."""
    consumer = make_consumer(kafka, group_id=None)
    async with started_admin(kafka) as admin:
        await consumer.start()
        try:
            committed = await admin.list_consumer_group_offsets(group_id(kafka, "sink"))
            partitions = (await describe_partitions(admin, [topics.pcm])).get(topics.pcm, set())
            parts = [TopicPartition(topics.pcm, p) for p in sorted(partitions)]
            ends = await consumer.end_offsets(parts)
            done = [ends[tp] == 0 or (tp in committed and committed[tp].offset >= ends[tp]) for tp in parts]
            return all(done)
        finally:
            await consumer.stop()


async def leader_with_most_partitions(kafka: KafkaSettings, topic: str, exclude: Collection[int] = ()) -> int:
    """The broker (node id) that leads most partitions of `topic`, other than those in `exclude`."""
    async with started_admin(kafka) as admin:
        (described,) = await admin.describe_topics([topic])
    led: dict[int, int] = {}
    for part in described["partitions"]:
        if part["leader"] >= 0 and part["leader"] not in exclude:
            led[part["leader"]] = led.get(part["leader"], 0) + 1
    if not led:
        raise RuntimeError(f"no broker outside {sorted(exclude)} leads a partition of {topic}")
    return max(led, key=lambda node: (led[node], -node))


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


async def kill_broker(stack: LocalStack, node_id: int) -> None:
    """SIGKILL broker `node_id` of the local cluster and wait until it is gone, ports included
    (a dying process loses its command line before its sockets: "not ours" is not yet "gone")."""
    node = next(n for n in stack.brokers if n.node_id == node_id)
    pid = node.pid()
    assert pid is not None, f"{node.name} is not running"
    os.kill(pid, signal.SIGKILL)
    async with asyncio.timeout(30):
        while processes.is_running(pid) or any(  # noqa: ASYNC110 - a foreign pid has no event
            processes.port_in_use(node.host, port) for port in (node.port, node.controller_port)
        ):
            await asyncio.sleep(0.1)


async def wait_in_sync(kafka: KafkaSettings, topics: TopicNames, timeout_s: float = 60.0) -> None:
    """Until every partition of the run's data topics has all its replicas in sync."""
    names = [topics.requests, topics.segments, topics.pcm, topics.results]
    async with started_admin(kafka) as admin, asyncio.timeout(timeout_s):
        while True:
            described = await admin.describe_topics(names)
            parts = [p for t in described for p in t["partitions"]]
            if parts and all(len(p["isr"]) == len(p["replicas"]) for p in parts):
                return
            await asyncio.sleep(0.2)  # polling the cluster's metadata: no event to await


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

    async def _kill_and_restart(self, name: str) -> None:
        self._restarting = True
        try:
            proc = self._proc(name)
            proc.popen.send_signal(signal.SIGKILL)
            await asyncio.to_thread(proc.popen.wait)
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
            proc = self._proc("front")
            proc.popen.send_signal(signal.SIGKILL)
            await asyncio.to_thread(proc.popen.wait)
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
        self._count(observer)
        self.report.duration_s = time.monotonic() - started
        return self.report

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
        await asyncio.sleep(1.0)

    def _count(self, observer: ResultObserver) -> None:
        r = self.report
        good = [k for k in self.sent_at if k not in self.poison_ids]
        r.sent = len(good)
        r.poison_sent = sum(1 for k in self.poison_ids if k in self.sent_at)
        r.poison_dead_lettered = sum(1 for k in self.poison_ids if observer.dead_letters.get(k))
        r.dead_letters = sum(observer.dead_letters.values())
        windows = sorted(r.faults, key=lambda f: f.ended)
        for key in good:
            seen = observer.results.get(key, [])
            if not seen:
                r.lost += 1
                continue
            statuses = [s for s, _ in seen]
            r.completed += statuses[0] == "completed"
            r.failed += statuses[0] != "completed"
            r.duplicate_results += len(seen) > 1
            r.flips += "completed" in statuses and statuses[-1] != "completed"
            at = seen[0][1]
            r.longest_settle_s = max(r.longest_settle_s, at - self.sent_at[key])
            before = [f for f in windows if f.ended <= at]
            last = before[-1] if before else None
            origin = max(self.sent_at[key], last.ended if last else 0.0)
            r.longest_wait_after_fault_s = max(r.longest_wait_after_fault_s, at - origin)
            if last is not None:
                r.wait_after[last.name] = max(r.wait_after.get(last.name, 0.0), at - origin)


def markdown(reports: list[ChaosReport]) -> str:
    return markdown_rows([rep.row() for rep in reports])
