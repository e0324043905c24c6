"""MinIO built from the Go module proxy and run on loopback.

No MinIO binary is published in a registry we reach, so `go install` builds the server once
per machine (a few minutes on 2 cores) into the per-machine cache. The server is AGPL and runs
as a separate process; nothing of it is linked into streamtts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from streamtts.errors import InfraError
from streamtts.infra.local import processes
from streamtts.infra.local.installer import Say, run_step
from streamtts.infra.local.paths import LocalPaths

# MinIO publishes no module tags any more; this pseudo-version is the one verified to build.
MINIO_MODULE = "github.com/minio/minio"
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"


@dataclass(frozen=True)
class MinioNode(processes.GoBuiltProcess):
    paths: LocalPaths
    access_key: str
    secret_key: str
    host: str = "127.0.0.1"
    port: int = 9000
    console_port: int = 9001
    netns: str = ""
    """The network namespace MinIO runs in (a host of its own); empty: this machine's own."""
    name = "minio"
    title = "MinIO"
    executable = "minio"

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def bin_dir(self) -> Path:
        return self.paths.cache_dir / f"minio-{MINIO_VERSION}"

    @property
    def data_dir(self) -> Path:
        return self.paths.state_dir / "minio" / "data"

    @property
    def marker(self) -> str:
        return str(self.data_dir)

    def install(self, say: Say) -> None:
        if self.installed():
            return
        go = self._go()
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        say(f"building MinIO {MINIO_VERSION} with `go install` (first time only; minutes on 2 cores)")
        env = dict(os.environ, GOBIN=str(self.bin_dir), CGO_ENABLED="0", GOFLAGS="-mod=mod")
        run_step(
            [go, "install", f"{MINIO_MODULE}@{MINIO_VERSION}"],
            what="building MinIO",
            log_file=self.paths.log_file("install-minio"),
            say=say,
            env=env,
            timeout_s=3000,
        )
        if not self.installed():
            raise InfraError(f"go install finished but {self.binary} is missing")

    def start(self, say: Say) -> int:
        if (pid := self.pid()) is not None:
            return pid
        processes.require_free_ports(
            self.host,
            (self.port, self.console_port),
            "stop it or set STREAMTTS_S3_ENDPOINT to a free port (the console uses port+1)",
        )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        say(f"starting MinIO on http://{self.endpoint}")
        env = dict(
            os.environ,
            MINIO_ROOT_USER=self.access_key,
            MINIO_ROOT_PASSWORD=self.secret_key,
            MINIO_BROWSER="off",
            MINIO_UPDATE="off",
        )
        # Its data scanner reads every object's metadata each 16th cycle (a cycle a minute by
        # default): on this machine's store of ~13,000 objects a pass costs seconds of CPU,
        # and two of 32 measured rounds of a day's benches took it (MinIO 3 → 17-22 ms per
        # request). A local single-drive store has nothing to heal and no lifecycle rule to
        # apply on time: `slowest` paces it 100× slower, every 30 min.
        env.setdefault("MINIO_SCANNER_SPEED", "slowest")
        argv = [
            str(self.binary),
            "server",
            str(self.data_dir),
            "--quiet",
            "--json",
            "--address",
            self.endpoint,
            "--console-address",
            f"{self.host}:{self.console_port}",
        ]
        return self._spawn(argv, netns=self.netns, env=env)

    def ready(self) -> bool:
        """MinIO's own readiness probe answers 200."""
        return processes.http_ok(f"http://{self.endpoint}/minio/health/ready")

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        self._wait_ready(timeout_s, poll_s=0.2)


def minio_credentials_valid(access_key: str, secret_key: str) -> None:
    """MinIO refuses to start with short credentials; say so before it does."""
    if len(access_key) < 3:
        raise InfraError("STREAMTTS_S3_ACCESS_KEY must be at least 3 characters for MinIO")
    if len(secret_key) < 8:
        raise InfraError("STREAMTTS_S3_SECRET_KEY must be at least 8 characters for MinIO")
