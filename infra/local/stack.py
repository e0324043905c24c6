"""The local stack: Kafka (one node, or a quorum of N on loopback) and one MinIO server,
managed as a unit; or the same on hosts of their own (`on_hosts`: a network namespace per
broker, for MinIO and for each worker and the gateway, see `net_hosts.py`).

`up` is idempotent: it installs what is missing, starts what is not running, and waits until
both answer real requests (a Kafka metadata round-trip with every broker registered, MinIO's
readiness probe).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from streamtts.errors import InfraError
from streamtts.infra.local import net_hosts, processes
from streamtts.infra.local.installer import Say, say_stderr
from streamtts.infra.local.kafka_cluster import (
    cluster_nodes,
    forget_brokers,
    host_nodes,
    record_brokers,
    recorded_brokers,
)
from streamtts.infra.local.kafka_server import KAFKA_VERSION, KafkaNode, new_cluster_id
from streamtts.infra.local.minio_server import MINIO_VERSION, MinioNode, minio_credentials_valid
from streamtts.infra.local.net_hosts import LOCAL_NET, Host, HostNet
from streamtts.infra.local.paths import LocalPaths
from streamtts.runtime.settings import Settings


def _host_port(endpoint: str, default_port: int) -> tuple[str, int]:
    first = endpoint.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host:
        return first, default_port
    try:
        return host, int(port)
    except ValueError:
        raise InfraError(f"invalid endpoint {endpoint!r}: expected HOST:PORT") from None


WORKER_HOSTS = ("front", "front2", "synth1", "synth2", "gateway")
"""The hosts `on_hosts` makes for processes of the pipeline (`ip netns exec stts-front …`)."""


def hosts_paths(paths: LocalPaths) -> LocalPaths:
    return LocalPaths(cache_dir=paths.cache_dir, state_dir=paths.state_dir / "hosts")


def hosts_recorded(paths: LocalPaths) -> bool:
    """Whether the last `infra up` here ran on hosts of their own (so down/status follow it)."""
    return (paths.run_dir / "hosts-layout").exists()


def record_hosts(paths: LocalPaths, on: bool) -> None:
    marker = paths.run_dir / "hosts-layout"
    if on:
        paths.run_dir.mkdir(parents=True, exist_ok=True)
        marker.write_text("hosts\n")
    else:
        marker.unlink(missing_ok=True)


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    version: str
    endpoint: str
    pid: int | None
    ready: bool
    rss_mib: float | None
    log: str


@dataclass(frozen=True)
class LocalStack:
    kafka: KafkaNode
    """The first (or only) Kafka node."""
    minio: MinioNode
    extra_brokers: tuple[KafkaNode, ...] = ()
    """The other voters of a multi-node cluster (`infra up --brokers 3`)."""
    hosts: tuple[Host, ...] = ()
    """On hosts of their own (`on_hosts`): every host `up` makes, the workers' included."""

    @classmethod
    def from_settings(
        cls, settings: Settings, paths: LocalPaths | None = None, brokers: int | None = None
    ) -> LocalStack:
        """The stack the settings point at; `brokers` None: as many as `up` last started here."""
        paths = paths or LocalPaths.from_env()
        k_host, k_port = _host_port(settings.kafka.bootstrap_servers, 9092)
        m_host, m_port = _host_port(settings.s3.endpoint, 9000)
        for host in (k_host, m_host):
            if host not in ("127.0.0.1", "localhost", "::1"):
                raise InfraError(f"the local stack only runs on loopback, not {host!r}")
        first, *others = cluster_nodes(paths, "127.0.0.1", k_port, brokers or recorded_brokers(paths))
        minio = MinioNode(
            paths=paths,
            access_key=settings.s3.access_key,
            secret_key=settings.s3.secret_key,
            host="127.0.0.1",
            port=m_port,
            console_port=m_port + 1,
        )
        return cls(kafka=first, minio=minio, extra_brokers=tuple(others))

    @classmethod
    def on_hosts(
        cls, settings: Settings, paths: LocalPaths | None = None, brokers: int = 3, net: HostNet = LOCAL_NET
    ) -> LocalStack:
        """Brokers and MinIO each on a host of its own, plus the hosts workers and the gateway
        run on (WORKER_HOSTS). State apart from the loopback layouts: `<state>/hosts`."""
        paths = paths or LocalPaths.from_env()
        own = hosts_paths(paths)
        first, *others = host_nodes(own, brokers, net)
        minio_host = Host("minio", net)
        minio = MinioNode(
            paths=own,
            access_key=settings.s3.access_key,
            secret_key=settings.s3.secret_key,
            host=minio_host.address,
            port=9000,
            console_port=9001,
            netns=minio_host.netns,
        )
        nodes = (first, *others)
        hosts = (*(Host(n.name, net) for n in nodes), minio_host, *(Host(n, net) for n in WORKER_HOSTS))
        return cls(kafka=first, minio=minio, extra_brokers=tuple(others), hosts=hosts)

    @property
    def brokers(self) -> tuple[KafkaNode, ...]:
        return (self.kafka, *self.extra_brokers)

    @property
    def bootstrap(self) -> str:
        """Every broker, so a client can bootstrap while any one of them is down."""
        return ",".join(node.bootstrap for node in self.brokers)

    def up(
        self, say: Say = say_stderr, timeout_s: float = 90.0, *, with_minio: bool = True
    ) -> list[ServiceStatus]:
        """Install, start and wait for all services (Kafka alone: `with_minio=False`, for a
        cluster beside an object store that runs already). Returns their status."""
        started = time.monotonic()
        self.kafka.paths.ensure()
        if self.hosts:
            net_hosts.create(self.hosts)  # idempotent: a restart finds them made
        if with_minio:
            minio_credentials_valid(self.minio.access_key, self.minio.secret_key)
        # 1. Install before starting anything, so a failed build leaves nothing half-running.
        self.kafka.install(say)
        if with_minio:
            self.minio.install(say)
        # 2. Start everything; they boot in parallel (Kafka's JVM start dominates). The voters
        #    of one quorum share one cluster id: a restarted node keeps the one it has.
        boot = time.monotonic()
        cluster_id = self._cluster_id()
        with ThreadPoolExecutor(max_workers=len(self.brokers)) as pool:
            started_pids = list(pool.map(lambda node: node.start(say, cluster_id), self.brokers))
        pids = {node.name: pid for node, pid in zip(self.brokers, started_pids, strict=True)}
        if with_minio:
            pids["MinIO"] = self.minio.start(say)
        if self.extra_brokers:
            record_brokers(self.kafka.paths, len(self.brokers))
        # 3. Wait for real readiness, failing fast if a process died.
        self._wait_ready(pids, deadline=boot + timeout_s, with_minio=with_minio)
        say(f"local stack ready in {time.monotonic() - started:.1f} s")
        return self.status()

    def down(self, say: Say = say_stderr) -> None:
        # Stop MinIO first: nothing in MinIO depends on Kafka, and Kafka's shutdown is slower.
        if self.minio.stop():
            say("stopped MinIO")
        else:
            say("MinIO was not running")
        # The voters stop together: one by one, the last would wait for a quorum that is gone.
        with ThreadPoolExecutor(max_workers=len(self.brokers)) as pool:
            stopped = list(pool.map(lambda node: node.stop(), self.brokers))
        for node, was_running in zip(self.brokers, stopped, strict=True):
            say(f"stopped {node.name}" if was_running else f"{node.name} was not running")
        forget_brokers(self.kafka.paths)
        if self.hosts:
            gone = net_hosts.remove_all(self.hosts[0].net)
            say(f"removed {len(gone)} hosts' namespaces and links" if gone else "no hosts to remove")

    def status(self) -> list[ServiceStatus]:
        m_pid = self.minio.pid()
        return [
            *(self._broker_status(node) for node in self.brokers),
            ServiceStatus(
                name="minio",
                version=MINIO_VERSION,
                endpoint=f"http://{self.minio.endpoint}",
                pid=m_pid,
                ready=m_pid is not None and self.minio.ready(),
                rss_mib=_rss_mib(m_pid),
                log=str(self.minio.log_file),
            ),
        ]

    def _broker_status(self, node: KafkaNode) -> ServiceStatus:
        pid = node.pid()
        return ServiceStatus(
            name=node.name,
            version=KAFKA_VERSION,
            endpoint=node.bootstrap,
            pid=pid,
            ready=pid is not None and asyncio.run(_kafka_ready(node.bootstrap)),
            rss_mib=_rss_mib(pid),
            log=str(node.log_file),
        )

    def _cluster_id(self) -> str:
        """The id the formatted nodes share; a new one when none is formatted yet."""
        ids = {cid for node in self.brokers if (cid := node.formatted_cluster_id())}
        if len(ids) > 1:
            raise InfraError(
                f"the Kafka nodes in {self.kafka.paths.state_dir} belong to different clusters "
                f"({', '.join(sorted(ids))}): remove their data dirs to start afresh"
            )
        return next(iter(ids), None) or new_cluster_id()

    def _wait_ready(self, pids: dict[str, int], deadline: float, with_minio: bool) -> None:
        kafka_ok, minio_ok = False, not with_minio
        logs = {node.name: node.log_file for node in self.brokers}
        logs["MinIO"] = self.minio.log_file
        while time.monotonic() < deadline:
            for name, pid in pids.items():
                if not processes.is_running(pid):
                    raise InfraError(f"{name} exited during start-up (log: {logs[name]})")
            kafka_ok = kafka_ok or asyncio.run(_kafka_ready(self.bootstrap, brokers=len(self.brokers)))
            minio_ok = minio_ok or self.minio.ready()
            if kafka_ok and minio_ok:
                return
            time.sleep(0.25)
        missing = [n for n, ok in (("Kafka", kafka_ok), ("MinIO", minio_ok)) if not ok]
        raise InfraError(f"{' and '.join(missing)} not ready before the start-up deadline")


async def _kafka_ready(bootstrap: str, brokers: int = 1) -> bool:
    """A metadata round-trip listing `brokers` registered brokers: the listeners really serve
    (and every voter of a cluster has joined)."""
    from aiokafka.admin import AIOKafkaAdminClient

    if not all(processes.port_in_use(*_host_port(b, 9092)) for b in bootstrap.split(",")):
        return False
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    try:
        await asyncio.wait_for(admin.start(), timeout=4)
        cluster = await asyncio.wait_for(admin.describe_cluster(), timeout=4)
        return len(cluster.get("brokers") or []) >= brokers
    except Exception:  # not ready yet: any client error means "try again"
        return False
    finally:
        await admin.close()


def _rss_mib(pid: int | None) -> float | None:
    if pid is None:
        return None
    kib = processes.rss_kib(pid)
    return None if kib is None else round(kib / 1024, 1)
