"""Pipeline workers as separate processes (`streamtts run --stage …`), and their CPU and RSS.

Readiness is the worker's own `worker_started` JSON log event on stderr, never a sleep. The
stderr of every worker is drained by a thread (a full pipe would stall the worker) and kept
short in memory for error messages.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from streamtts.errors import StreamTTSError
from streamtts.infra.local.net_hosts import Host, HostNet
from streamtts.runtime.topology import TOPOLOGY

# The "front" process runs every stage that needs no model; the others get processes of their own.
FRONT_STAGES = tuple(spec.name for spec in TOPOLOGY if "model" not in spec.services)
SUMMED: dict[str, tuple[str, ...]] = {
    "synthesized": ("cpu_ms", "audio_s", "preemptions", "wasted_ms", "lane_run_ms")
}
"""Numeric log fields the bench adds up per process (see `WorkerProc.sums`)."""
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass(frozen=True)
class Topology:
    """One process for segment+encode+sink, `synth_procs` synthesize processes."""

    synth_procs: int = 1
    synth_threads: int = 2
    guarantee: str = "at_least_once"
    warm_voices: tuple[str, ...] = ("en_joe", "jm_kumo")
    wire_format: str | None = None
    """The stages' `wire_format` (None: the setting's default)."""
    store_streamed_frames: bool | None = None
    """Whether the sink stores the streamed frames (one encode per request; None: the
    setting's default)."""
    sink_alone: bool = False
    """The sink in a process of its own ("front-sink"): its file encoding and uploads then
    share no interpreter (GIL) with the encode stage's first chunks."""
    sink_nice: int = 0
    """With `sink_alone`: the sink process's nice (0-19). Nobody waits for its work with
    sub-second latency, so it can yield the CPU to first spans and first chunks."""
    front_procs: int = 1
    """Processes running the front stages ("front", "front2"): a second one takes over the
    first one's partitions when it is cut off."""
    host_net: HostNet | None = None
    """Each process on the host of its name in this net (`net_hosts.py`: front, front2,
    synth1, synth2); None: on this machine's own network."""

    @property
    def label(self) -> str:
        wire = f" {self.wire_format}" if self.wire_format else ""
        if self.store_streamed_frames is not None:
            wire += " one-encode" if self.store_streamed_frames else " two-encodes"
        alone = ""
        if self.sink_alone:
            alone = " sink-alone" + (f" nice {self.sink_nice}" if self.sink_nice else "")
        return f"{self.synth_procs}x{self.synth_threads}t {self.guarantee}{wire}{alone}"


@dataclass
class WorkerProc:
    name: str
    popen: subprocess.Popen[bytes]
    started: threading.Event = field(default_factory=threading.Event)
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=40))
    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    sums: collections.defaultdict[str, float] = field(default_factory=lambda: collections.defaultdict(float))
    """`event.field` → the sum of that numeric field over the process's log events
    (`SUMMED` only), e.g. the render CPU of every synthesized span."""
    steps: list[str] = field(default_factory=list)
    """The start-up steps the worker began (its `start_step` events), in order."""
    _step_seen: threading.Condition = field(default_factory=threading.Condition)

    def wait_step(self, prefix: str, timeout_s: float) -> str | None:
        """Block until the worker begins a start-up step named `prefix…` (returns its name),
        or None when it exits or `timeout_s` passes first."""
        deadline = time.monotonic() + timeout_s
        with self._step_seen:
            while True:
                hit = next((s for s in self.steps if s.startswith(prefix)), None)
                left = deadline - time.monotonic()
                if hit is not None or left <= 0 or self.popen.poll() is not None:
                    return hit
                self._step_seen.wait(min(left, 0.5))  # woken by the drain; the poll sees an exit

    def drain(self, log_file: Path | None) -> None:
        out = log_file.open("ab") if log_file else None
        try:
            assert self.popen.stderr is not None
            for raw in self.popen.stderr:
                if out:
                    out.write(raw)
                line = raw.decode(errors="replace").strip()
                self.tail.append(line)
                try:
                    parsed = json.loads(line)
                    event = parsed.get("event")
                except (ValueError, AttributeError):
                    continue
                if isinstance(event, str):
                    self.counts[event] += 1
                    for name in SUMMED.get(event, ()):
                        value = parsed.get(name)
                        if isinstance(value, int | float):
                            self.sums[f"{event}.{name}"] += float(value)
                    if event == "worker_started":
                        self.started.set()
                    elif event == "start_step":
                        with self._step_seen:
                            self.steps.append(str(parsed.get("step")))
                            self._step_seen.notify_all()
        finally:
            if out:
                out.close()


@dataclass
class ProcUsage:
    cpu_s: float
    cpu_pct: float
    """Of one core, over the window (200 % = both cores of this machine busy)."""
    rss_peak_mb: float


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from field 3 on (None: no such process). fields[k] is proc(5)'s k + 3."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()  # comm may contain spaces; fields after ")" are fixed


def _cpu_ticks(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[11]) + int(fields[12])  # utime + stime


def process_age_s(pid: int) -> float | None:
    """Seconds since process `pid` started (None: no such process, or no /proc)."""
    fields = _stat_fields(pid)
    try:
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return (
        None if fields is None else max(0.0, uptime_s - int(fields[19]) / CLK_TCK)
    )  # starttime: field 22 of proc(5)


def _machine_busy_ticks() -> int:
    """CPU ticks all cores spent busy (everything but idle and iowait), from /proc/stat."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return 0
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in first[1:9])
    return user + nice + system + irq + softirq + steal


def _rss_mb(pid: int) -> float:
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * PAGE_KB / 1024


OTHERS = "others"
"""Pseudo-process: CPU of everything else on the machine (a noisy neighbour shows up here)."""


class UsageWindow:
    """CPU time and peak RSS of some processes between `start()` and `stop()` (sampled at
    `every_s` for the RSS peak; CPU from the kernel's counters, so it is exact), plus the CPU
    the rest of the machine used meanwhile (`OTHERS`)."""

    def __init__(self, pids: dict[str, int], every_s: float = 0.5) -> None:
        self.pids = pids
        self.every_s = every_s
        self._t0 = 0.0
        self._ticks0: dict[str, int] = {}
        self._peak: dict[str, float] = dict.fromkeys(pids, 0.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def start(self) -> UsageWindow:
        self._t0 = time.monotonic()
        self._ticks0 = {n: _cpu_ticks(p) or 0 for n, p in self.pids.items()}
        self._machine0 = _machine_busy_ticks()
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            for name, pid in self.pids.items():
                self._peak[name] = max(self._peak[name], _rss_mb(pid))

    def stop(self) -> dict[str, ProcUsage]:
        self._stop.set()
        self._thread.join()
        wall = max(time.monotonic() - self._t0, 1e-9)
        out = {}
        for name, pid in self.pids.items():
            ticks = (_cpu_ticks(pid) or self._ticks0[name]) - self._ticks0[name]
            self._peak[name] = max(self._peak[name], _rss_mb(pid))
            cpu_s = ticks / CLK_TCK
            out[name] = ProcUsage(round(cpu_s, 2), round(100 * cpu_s / wall, 1), round(self._peak[name], 1))
        others_s = max(
            0.0, (_machine_busy_ticks() - self._machine0) / CLK_TCK - sum(u.cpu_s for u in out.values())
        )
        out[OTHERS] = ProcUsage(round(others_s, 2), round(100 * others_s / wall, 1), 0.0)
        return out


class WorkerSet:
    """Start the processes of a `Topology` on one topic prefix; stop them with SIGTERM."""

    def __init__(self, topology: Topology, env: dict[str, str], log_dir: Path | None = None) -> None:
        self.topology = topology
        self.env = env
        self.log_dir = log_dir
        self.procs: list[WorkerProc] = []
        self._specs: dict[str, tuple[tuple[str, ...], dict[str, str], int]] = {}

    def _spawn(self, name: str, stages: tuple[str, ...], extra_env: dict[str, str], nice: int = 0) -> None:
        self._specs[name] = (stages, extra_env, nice)
        cmd = [
            *(("nice", "-n", str(nice)) if nice else ()),
            sys.executable,
            "-m",
            "streamtts.cli.main",
            "run",
        ]
        for stage in stages:
            cmd += ["--stage", stage]
        if self.topology.host_net is not None:
            cmd = Host(name, self.topology.host_net).exec_argv(cmd)
        popen = subprocess.Popen(
            cmd,
            env={**self.env, **extra_env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        proc = WorkerProc(name, popen)
        log_file = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log_file = self.log_dir / f"{name}.log"
        threading.Thread(target=proc.drain, args=(log_file,), daemon=True).start()
        self.procs.append(proc)

    def start(self, timeout_s: float = 90.0) -> float:
        """Spawn every process, return once all logged `worker_started` (seconds taken)."""
        t = self.topology
        started = time.monotonic()
        common = {
            "STREAMTTS_PROCESSING_GUARANTEE": t.guarantee,
            "STREAMTTS_WARM_VOICES": ",".join(t.warm_voices),
            "PYTHONUNBUFFERED": "1",
        }
        if t.wire_format:
            common["STREAMTTS_WIRE_FORMAT"] = t.wire_format
        if t.store_streamed_frames is not None:
            common["STREAMTTS_STORE_STREAMED_FRAMES"] = "true" if t.store_streamed_frames else "false"
        if t.sink_alone:
            self._spawn("front", tuple(s for s in FRONT_STAGES if s != "sink"), common)
            self._spawn("front-sink", ("sink",), common, nice=t.sink_nice)
        else:
            for i in range(t.front_procs):
                self._spawn("front" if i == 0 else f"front{i + 1}", FRONT_STAGES, common)
        for i in range(t.synth_procs):
            self._spawn(
                f"synth{i + 1}", ("synthesize",), {**common, "STREAMTTS_SYNTH_THREADS": str(t.synth_threads)}
            )
        deadline = started + timeout_s
        for proc in self.procs:
            while not proc.started.wait(0.2):
                if proc.popen.poll() is not None or time.monotonic() > deadline:
                    tail = " | ".join(list(proc.tail)[-3:])[-400:]
                    self.stop()
                    raise StreamTTSError(f"worker {proc.name} did not start: {tail or 'no output'}")
        return time.monotonic() - started

    def respawn(self, name: str, timeout_s: float = 90.0, *, wait: bool = True) -> float:
        """Start `name` again (same stages and environment) after it died; returns once it
        logged `worker_started` (seconds taken), or at once with `wait=False`."""
        started = time.monotonic()
        self.procs = [p for p in self.procs if p.name != name]
        stages, extra_env, nice = self._specs[name]
        self._spawn(name, stages, extra_env, nice)
        proc = self.procs[-1]
        if not wait:
            return 0.0
        while not proc.started.wait(0.2):
            if proc.popen.poll() is not None or time.monotonic() - started > timeout_s:
                tail = " | ".join(list(proc.tail)[-3:])[-400:]
                raise StreamTTSError(f"worker {name} did not restart: {tail or 'no output'}")
        return time.monotonic() - started

    @property
    def pids(self) -> dict[str, int]:
        return {p.name: p.popen.pid for p in self.procs}

    def counts(self, event: str) -> int:
        return sum(p.counts[event] for p in self.procs)

    def summed(self, key: str) -> float:
        """`event.field` summed over every process's log so far (see `SUMMED`)."""
        return float(sum(p.sums[key] for p in self.procs))

    def alive(self) -> bool:
        return all(p.popen.poll() is None for p in self.procs)

    def stop(self, timeout_s: float = 20.0) -> None:
        for proc in self.procs:
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in self.procs:
            try:
                proc.popen.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.popen.kill()  # our own child, by pid
                proc.popen.wait()
        self.procs.clear()
