"""`streamtts chaos --hosts`: steady load through a schedule of network faults between hosts
of their own, judged by the independent checker (`net_checker.py`).

Every broker, MinIO and each worker (front, front2: segment+encode+sink; synth1, synth2) runs
on a host of its own (`LocalStack.on_hosts`); the load generator and the checker run on the
machine's own namespace, a client host on the same bridge. Faults come from `net_nemeses.py`
(a fixed list or a seeded random schedule); after the last heal every acknowledged request
must settle within `settle_s`, then the checker reads the topics and the bucket.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaProducer

from streamtts.bench.broker_faults import leader_with_most_partitions
from streamtts.bench.chaos import steady_load
from streamtts.bench.net_checker import Verdict, check, chunks_problem, observe
from streamtts.bench.net_nemeses import NEEDS_SHAPERS, Cluster, Step, fault
from streamtts.bench.result_observer import ResultObserver
from streamtts.bench.worker_procs import Topology, WorkerSet
from streamtts.infra.local import net_faults
from streamtts.infra.local.net_shaper import Shaper
from streamtts.infra.local.stack import LocalStack
from streamtts.infra.topics import apply_topics, drop_topics
from streamtts.runtime.kafka import make_producer
from streamtts.runtime.settings import KafkaSettings, S3Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import TTSRequest

TEXTS = (
    "Thank you for calling. How can I help you today?",
    "Your order has shipped and will arrive on Friday.",
    "Please hold while I transfer you to an agent.",
)
Say = Callable[[str], None]


@dataclass
class FaultRecord:
    nemesis: str
    target: str
    started: float
    healed: float = 0.0


@dataclass
class NetChaosReport:
    guarantee: str
    seed: int | None
    sent: dict[str, float] = field(default_factory=dict)
    """Acknowledged request id → wall-clock send time (epoch seconds)."""
    not_acked: int = 0
    faults: list[FaultRecord] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    settle_after_heal_s: float = 0.0
    """From the last heal until every acknowledged request had a result (or the bound)."""
    settled: bool = False
    unplanned_restarts: list[str] = field(default_factory=list)
    """Workers that exited by themselves and were restarted, as an orchestrator would."""
    latencies: list[tuple[float, float, str]] = field(default_factory=list)
    """(send time, seconds to first result, status) per acknowledged request."""
    started: float = 0.0
    session_timeout_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.settled and all(v.ok for v in self.verdicts)


@dataclass(frozen=True)
class NetChaosPlan:
    steps: tuple[Step, ...]
    guarantee: str = "exactly_once"
    rate: float = 2.0
    settle_s: float = 60.0
    """Every request has its result this long after the last heal, or the run fails."""
    tail_s: float = 5.0
    """Steady load after the last heal, before the load stops."""
    seed: int | None = None
    fronts: int = 2
    """Front workers (segment+encode+sink): two, so one takes over when the other is cut off."""
    synths: int = 2
    session_timeout_s: float = 6.0
    """The workers' group session: how long a cut worker keeps its partitions (failover speed)
    and how long a pause may last without a rebalance (false alarms)."""


class NetChaosRun:
    def __init__(
        self,
        stack: LocalStack,
        s3: S3Settings,
        plan: NetChaosPlan,
        *,
        prefix: str,
        say: Say,
        log_dir: Path | None = None,
    ) -> None:
        if not stack.hosts:
            raise ValueError("network chaos needs the stack on hosts of its own (LocalStack.on_hosts)")
        self.stack, self.plan, self.say = stack, plan, say
        self.s3 = S3Settings(
            endpoint=stack.minio.endpoint,
            access_key=s3.access_key,
            secret_key=s3.secret_key,
            bucket=s3.bucket,
        )
        self.kafka = KafkaSettings(bootstrap_servers=stack.bootstrap, topic_prefix=prefix)
        self.topics = TopicNames(prefix)
        self.run_prefix = f"{prefix.rstrip('-.')}-r"
        env = {
            **os.environ,
            "STREAMTTS_KAFKA_BOOTSTRAP": stack.bootstrap,
            "STREAMTTS_S3_ENDPOINT": self.s3.endpoint,
            "STREAMTTS_S3_ACCESS_KEY": s3.access_key,
            "STREAMTTS_S3_SECRET_KEY": s3.secret_key,
            "STREAMTTS_S3_BUCKET": s3.bucket,
            "STREAMTTS_TOPIC_PREFIX": prefix,
            "STREAMTTS_SESSION_TIMEOUT_S": f"{plan.session_timeout_s:g}",
        }
        net = stack.hosts[0].net
        self.cluster = Cluster(
            brokers=len(stack.brokers),
            fronts=("front", "front2")[: plan.fronts],
            synths=("synth1", "synth2")[: plan.synths],
            net=net,
        )
        topology = Topology(
            guarantee=plan.guarantee,
            warm_voices=("en_joe",),
            front_procs=plan.fronts,
            synth_procs=plan.synths,
            synth_threads=1,
            host_net=net,
        )
        if log_dir:
            log_dir.mkdir(parents=True, exist_ok=True)
        self.workers = WorkerSet(topology, env, log_dir)
        self.shapers: dict[str, Shaper] = {}
        self._shaper_dir: Path | None = None
        if NEEDS_SHAPERS & {step.nemesis for step in plan.steps}:
            # In the path from the start (a redirect catches only new connections), calm until
            # a nemesis slows them; the control sockets want a short path (108 bytes at most).
            sockets = self._shaper_dir = Path(tempfile.mkdtemp(prefix="stts-shape-"))
            brokers = self.cluster.addresses(self.cluster.broker_names)
            for name in self.cluster.synths:
                self.shapers[name] = Shaper(self.cluster.host(name), brokers, sockets / f"{name}.sock")
        self.report = NetChaosReport(plan.guarantee, plan.seed, session_timeout_s=plan.session_timeout_s)
        self._producer: AIOKafkaProducer | None = None

    async def _send(self, req: TTSRequest) -> None:
        assert self._producer is not None
        at = time.time()
        try:
            key = req.request_id.encode()
            await self._producer.send_and_wait(self.topics.requests, req.to_bytes(), key=key)
        except Exception as err:  # not acknowledged: not part of the promise
            self.report.not_acked += 1
            self.say(f"[net-chaos] {req.request_id} not acknowledged: {type(err).__name__}")
            return
        self.report.sent[req.request_id] = at

    async def _load(self) -> None:
        async def send(n: int) -> None:
            text = TEXTS[n % len(TEXTS)]
            await self._send(
                TTSRequest.new(text, request_id=f"{self.run_prefix}{n:05d}", voice="en_joe", language="en")
            )

        await steady_load(self.plan.rate, send)

    async def _nemesis(self, step: Step, t0: float) -> None:
        await asyncio.sleep(max(0.0, t0 + step.at_s - time.monotonic()))
        leader = 0
        if step.nemesis == "isolate_leader":
            leader = await leader_with_most_partitions(self.kafka, self.topics.requests)
        nemesis = fault(step.nemesis, self.cluster, lambda: leader)
        fault_id = f"{step.nemesis}_{int(step.at_s * 10)}"
        record = FaultRecord(step.nemesis, nemesis.target, time.time())
        self.report.faults.append(record)
        self.say(f"[net-chaos] {step.nemesis}: {nemesis.target} for {step.duration_s:.0f} s")
        await asyncio.to_thread(net_faults.apply, fault_id, nemesis.link_rules)
        for name in nemesis.delayed:
            await asyncio.to_thread(self.shapers[name].set, *nemesis.delay_ms)
        try:
            await asyncio.sleep(step.duration_s)
        finally:
            for name in nemesis.delayed:
                await asyncio.to_thread(self.shapers[name].set, 0.0, 0.0)
            await asyncio.to_thread(net_faults.heal, fault_id, [r.host for r in nemesis.link_rules])
            record.healed = time.time()
            self.say(f"[net-chaos] healed {step.nemesis}")

    async def _supervise(self) -> None:
        """Restart a worker that exited on its own (the orchestrator's job), and say so."""
        while True:
            await asyncio.sleep(0.5)  # polling child processes
            for proc in list(self.workers.procs):
                if proc.popen.poll() is not None:
                    self.report.unplanned_restarts.append(f"{proc.name} ({proc.popen.returncode})")
                    code = proc.popen.returncode
                    self.say(f"[net-chaos] {proc.name} exited by itself ({code}); restarting")
                    await asyncio.to_thread(self.workers.respawn, proc.name, 180.0)

    async def _settle(self, observer: ResultObserver) -> None:
        """Until every acknowledged request has its result and every completed one all its
        chunks on tts.audio: a live stream held up past the heal is unsettled too."""
        while not set(self.report.sent) <= set(observer.results):  # noqa: ASYNC110
            await asyncio.sleep(0.5)  # polling an independent subscriber's view
        exactly_once = self.plan.guarantee == "exactly_once"
        while True:
            history = await observe(
                self.kafka, self.topics, self.s3, self.run_prefix, exactly_once=exactly_once, objects=False
            )
            waiting = [
                k
                for k, seen in history.results.items()
                if seen[0].status == "completed" and chunks_problem(history.chunks.get(k, []))
            ]
            if not waiting:
                return
            await asyncio.sleep(2.0)  # the stream's chunks come when the encode stage is back

    async def run(self) -> NetChaosReport:
        await apply_topics(self.kafka)
        try:
            for shaper in self.shapers.values():
                await asyncio.to_thread(shaper.start)
            return await self._run()
        finally:
            for shaper in self.shapers.values():  # stopping one never started is a no-op
                await asyncio.to_thread(shaper.stop)
            if self._shaper_dir is not None:
                shutil.rmtree(self._shaper_dir, ignore_errors=True)
            if error := await drop_topics(self.kafka):
                self.say(f"[net-chaos] could not delete the run's topics: {error}")

    async def _run(self) -> NetChaosReport:
        await asyncio.to_thread(self.workers.start, 180.0)
        observer = ResultObserver(self.kafka, self.topics)
        await observer.start()
        self._producer = make_producer(self.kafka)
        await self._producer.start()
        load = asyncio.create_task(self._load())
        supervisor = asyncio.create_task(self._supervise())
        t0 = time.monotonic()
        self.report.started = time.time()
        try:
            await asyncio.gather(*(self._nemesis(step, t0) for step in self.plan.steps))
            healed = time.monotonic()
            await asyncio.sleep(self.plan.tail_s)
            load.cancel()
            await asyncio.gather(load, return_exceptions=True)
            try:
                async with asyncio.timeout(max(0.0, healed + self.plan.settle_s - time.monotonic())):
                    await self._settle(observer)
                self.report.settled = True
            except TimeoutError:
                missing = sorted(set(self.report.sent) - set(observer.results))
                bound = self.plan.settle_s
                self.say(f"[net-chaos] unsettled {bound:.0f} s after the heal: {len(missing)} with no result")
            self.report.settle_after_heal_s = time.monotonic() - healed
        finally:
            for task in (load, supervisor):
                task.cancel()
            await asyncio.gather(load, supervisor, return_exceptions=True)
            await self._producer.stop()
            await observer.stop()
            await asyncio.to_thread(self.workers.stop)
        exactly_once = self.plan.guarantee == "exactly_once"
        history = await observe(self.kafka, self.topics, self.s3, self.run_prefix, exactly_once=exactly_once)
        self.report.verdicts = await asyncio.to_thread(
            check, history, self.report.sent, self.s3, exactly_once=exactly_once
        )
        for key, at in sorted(self.report.sent.items(), key=lambda kv: kv[1]):
            seen = history.results.get(key)
            if seen:
                self.report.latencies.append((at, seen[0].at_ms / 1000.0 - at, seen[0].status))
        return self.report
