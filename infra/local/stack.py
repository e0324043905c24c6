"""The local default stack: one Kafka node and one MinIO server, managed as a unit.

`up` is idempotent: it installs what is missing, starts what is not running, and waits until
both answer real requests (a Kafka metadata round-trip, MinIO's readiness probe).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from streamtts.errors import InfraError
from streamtts.infra.local import processes
from streamtts.infra.local.installer import Say, say_stderr
from streamtts.infra.local.kafka_server import KAFKA_VERSION, KafkaNode
from streamtts.infra.local.minio_server import MINIO_VERSION, MinioNode, minio_credentials_valid
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
    minio: MinioNode

    @classmethod
    def from_settings(cls, settings: Settings, paths: LocalPaths | None = None) -> LocalStack:
        paths = paths or LocalPaths.from_env()
        k_host, k_port = _host_port(settings.kafka.bootstrap_servers, 9092)
        m_host, m_port = _host_port(settings.s3.endpoint, 9000)
        for host in (k_host, m_host):
            if host not in ("127.0.0.1", "localhost", "::1"):
                raise InfraError(f"the local stack only runs on loopback, not {host!r}")
        kafka = KafkaNode(paths=paths, host="127.0.0.1", port=k_port, controller_port=k_port + 1)
        minio = MinioNode(
            paths=paths,
            access_key=settings.s3.access_key,
            secret_key=settings.s3.secret_key,
            host="127.0.0.1",
            port=m_port,
            console_port=m_port + 1,
        )
        return cls(kafka=kafka, minio=minio)

    def up(self, say: Say = say_stderr, timeout_s: float = 90.0) -> list[ServiceStatus]:
        """Install, start and wait for both services. Returns their status."""
        started = time.monotonic()
        self.kafka.paths.ensure()
        minio_credentials_valid(self.minio.access_key, self.minio.secret_key)
        # 1. Install before starting anything, so a failed build leaves nothing half-running.
        self.kafka.install(say)
        self.minio.install(say)
        # 2. Start both; they boot in parallel (Kafka's JVM start dominates).
        boot = time.monotonic()
        pids = {"Kafka": self.kafka.start(say), "MinIO": self.minio.start(say)}
        # 3. Wait for real readiness, failing fast if a process died.
        self._wait_ready(pids, deadline=boot + timeout_s)
        say(f"local stack ready in {time.monotonic() - started:.1f} s")
        return self.status()

    def down(self, say: Say = say_stderr) -> None:
        # Stop MinIO first: nothing in MinIO depends on Kafka, and Kafka's shutdown is slower.
        for name, node in (("MinIO", self.minio), ("Kafka", self.kafka)):
            if node.stop():
                say(f"stopped {name}")
            else:
                say(f"{name} was not running")

    def status(self) -> list[ServiceStatus]:
        k_pid, m_pid = self.kafka.pid(), self.minio.pid()
        return [
            ServiceStatus(
                name="kafka",
                version=KAFKA_VERSION,
                endpoint=self.kafka.bootstrap,
                pid=k_pid,
                ready=k_pid is not None and asyncio.run(_kafka_ready(self.kafka.bootstrap)),
                rss_mib=_rss_mib(k_pid),
                log=str(self.kafka.paths.log_file("kafka")),
            ),
            ServiceStatus(
                name="minio",
                version=MINIO_VERSION,
                endpoint=f"http://{self.minio.endpoint}",
                pid=m_pid,
                ready=m_pid is not None and self.minio.ready(),
                rss_mib=_rss_mib(m_pid),
                log=str(self.minio.paths.log_file("minio")),
            ),
        ]

    def _wait_ready(self, pids: dict[str, int], deadline: float) -> None:
        kafka_ok = minio_ok = False
        logs = {
            "Kafka": self.kafka.paths.log_file("kafka"),
            "MinIO": self.minio.paths.log_file("minio"),
        }
        while time.monotonic() < deadline:
            for name, pid in pids.items():
                if not processes.is_running(pid):
                    raise InfraError(f"{name} exited during start-up (log: {logs[name]})")
            kafka_ok = kafka_ok or asyncio.run(_kafka_ready(self.kafka.bootstrap))
            minio_ok = minio_ok or self.minio.ready()
            if kafka_ok and minio_ok:
                return
            time.sleep(0.25)
        missing = [n for n, ok in (("Kafka", kafka_ok), ("MinIO", minio_ok)) if not ok]
        raise InfraError(f"{' and '.join(missing)} not ready before the start-up deadline")


async def _kafka_ready(bootstrap: str) -> bool:
    """A metadata round-trip with a registered broker: the listener is really serving."""
    from aiokafka.admin import AIOKafkaAdminClient

    if not processes.port_in_use(*_host_port(bootstrap, 9092)):
        return False
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    try:
        await asyncio.wait_for(admin.start(), timeout=4)
        cluster = await asyncio.wait_for(admin.describe_cluster(), timeout=4)
        return bool(cluster.get("brokers"))
    except Exception:  # not ready yet: any client error means "try again"
        return False
    finally:
        await admin.close()


def _rss_mib(pid: int | None) -> float | None:
    if pid is None:
        return None
    kib = processes.rss_kib(pid)
    return None if kib is None else round(kib / 1024, 1)
