"""Jaeger (all-in-one, in-memory) built from the Go module proxy and run on loopback: the
local OTLP backend for traces (`streamtts infra up --tracing`) and its query API.

No Jaeger binary is published in a registry we reach. `go install …/cmd/jaeger@v1.75.0`
refuses the module (its go.mod has replace directives), so its source is downloaded through
the module proxy and built as the main module, once per machine (~6 min on 2 cores) into the
per-machine cache. The module carries no UI assets (its `cmd/query/app/ui/actual` is empty:
the UI is built by a separate npm project), so :16686 serves Jaeger's placeholder page; the
query API is complete, and `streamtts trace ID` and the web page draw the waterfall from it.
Jaeger runs as a separate process; nothing of it is linked into streamtts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from streamtts.errors import InfraError
from streamtts.infra.local import processes
from streamtts.infra.local.installer import Say, run_step
from streamtts.infra.local.paths import LocalPaths
from streamtts.infra.local.stack import ServiceStatus

JAEGER_MODULE = "github.com/jaegertracing/jaeger"
JAEGER_VERSION = "v1.75.0"
_VERSION_PKG = f"{JAEGER_MODULE}/internal/version"

# Only what the local stack uses, all on loopback: OTLP over HTTP in, the query API out, the
# health check. Jaeger's default all-in-one config also opens OTLP/gRPC, Zipkin, Jaeger's own
# receivers, sampling and zpages, and the query API on every interface.
CONFIG_TEMPLATE = """\
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    traces:
      level: none
    logs:
      level: info
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: {host}:{health_port}
  jaeger_query:
    enable_tracing: false  # its own spans would go to a collector on :4317
    storage:
      traces: memstore
    http:
      endpoint: {host}:{query_port}
    grpc:
      endpoint: {host}:{query_grpc_port}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: {host}:{otlp_port}
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""


@dataclass(frozen=True)
class JaegerNode(processes.GoBuiltProcess):
    paths: LocalPaths
    host: str = "127.0.0.1"
    otlp_port: int = 4318
    query_port: int = 16686
    health_port: int = 13133
    name: str = "jaeger"
    """Its pid, log and state names (a test stack runs its own under another name)."""
    title = "Jaeger"
    executable = "jaeger"

    @property
    def otlp_endpoint(self) -> str:
        """What STREAMTTS_OTLP_ENDPOINT names (spans go to <it>/v1/traces)."""
        return f"http://{self.host}:{self.otlp_port}"

    @property
    def query_url(self) -> str:
        return f"http://{self.host}:{self.query_port}"

    @property
    def bin_dir(self) -> Path:
        return self.paths.cache_dir / "jaeger" / f"jaeger-{JAEGER_VERSION.removeprefix('v')}"

    @property
    def config_file(self) -> Path:
        return self.paths.state_dir / self.name / "jaeger.yaml"

    @property
    def marker(self) -> str:
        return str(self.config_file)

    def install(self, say: Say) -> None:
        if self.installed():
            return
        go = self._go()
        env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
        say(f"building Jaeger {JAEGER_VERSION} from the Go module proxy (first time only; ~6 min on 2 cores)")
        try:
            found = subprocess.run(
                [go, "mod", "download", "-json", f"{JAEGER_MODULE}@{JAEGER_VERSION}"],
                capture_output=True,
                env=env,
                timeout=900,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise InfraError(f"downloading {JAEGER_MODULE}@{JAEGER_VERSION} took over 15 min") from None
        if found.returncode != 0:
            why = found.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            raise InfraError(f"downloading {JAEGER_MODULE}@{JAEGER_VERSION} failed: {why[0][:300]}")
        module_dir = Path(json.loads(found.stdout)["Dir"])
        # The module cache is read-only, and its replace directives hold only for the main
        # module: build a copy of the source as the main module.
        source = self.bin_dir.parent / f"src-{JAEGER_VERSION}"
        _remove(source)  # a failed build's copy
        shutil.copytree(module_dir, source)
        for path in [source, *source.rglob("*")]:  # the module cache's files are read-only
            path.chmod(path.stat().st_mode | 0o200)
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        flags = f"-s -w -X {_VERSION_PKG}.latestVersion={JAEGER_VERSION}"
        run_step(
            [go, "build", "-trimpath", "-ldflags", flags, "-o", str(self.binary), "./cmd/jaeger"],
            what="building Jaeger",
            log_file=self.paths.log_file("install-jaeger"),
            say=say,
            env=env,
            cwd=source,
            timeout_s=3000,
        )
        _remove(source)
        if not self.installed():
            raise InfraError(f"go build finished but {self.binary} is missing")

    def start(self, say: Say) -> int:
        if (pid := self.pid()) is not None:
            return pid
        ports = (self.otlp_port, self.query_port, self.health_port, self.query_port - 1)
        processes.require_free_ports(self.host, ports, "stop it first")
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(
            CONFIG_TEMPLATE.format(
                host=self.host,
                otlp_port=self.otlp_port,
                query_port=self.query_port,
                query_grpc_port=self.query_port - 1,
                health_port=self.health_port,
            )
        )
        say(f"starting Jaeger on {self.query_url} (OTLP/HTTP in: {self.otlp_endpoint})")
        argv = [str(self.binary), "--config", str(self.config_file)]
        return self._spawn(argv)

    def ready(self) -> bool:
        """Its health check answers 200 and the query API answers."""
        health = f"http://{self.host}:{self.health_port}/status"
        return processes.http_ok(health) and processes.http_ok(f"{self.query_url}/api/services")

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        self._wait_ready(timeout_s, poll_s=0.1)


def _remove(tree: Path) -> None:
    """Delete `tree`, read-only parts included (copied from the module cache)."""
    if tree.exists():
        for path in [tree, *tree.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o700)
        shutil.rmtree(tree)


def jaeger_status(node: JaegerNode) -> ServiceStatus:
    """The `infra status` row of the local Jaeger."""
    pid = node.pid()
    rss = processes.rss_kib(pid) if pid is not None else None
    return ServiceStatus(
        name=node.name,
        version=JAEGER_VERSION,
        endpoint=node.query_url,
        pid=pid,
        ready=pid is not None and node.ready(),
        rss_mib=rss / 1024 if rss is not None else None,
        log=str(node.log_file),
    )
