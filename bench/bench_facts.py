"""What a bench run needs around its loads: its single-use topics made and dropped, the bytes
its topics wrote to the local broker, the pipeline's CPU, and the machine's facts."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

from streamtts.bench.bench_plan import LoadRun
from streamtts.bench.stats import summarize
from streamtts.bench.worker_procs import OTHERS, ProcUsage
from streamtts.errors import ConfigError
from streamtts.runtime.settings import Settings


def say(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


async def apply_bench_topics(settings: Settings, prefix: str) -> None:
    from streamtts.infra.topics import apply_spec, load_spec
    from streamtts.runtime.kafka import make_admin

    admin = make_admin(settings.kafka)
    try:
        await admin.start()
    except Exception as err:
        raise ConfigError(
            f"Kafka at {settings.kafka.bootstrap_servers} is not reachable ({type(err).__name__}); "
            "run `streamtts infra up` first"
        ) from None
    try:
        await apply_spec(admin, load_spec(prefix=prefix))
    finally:
        await admin.close()


async def drop_bench_topics(settings: Settings, prefix: str) -> None:
    """A bench prefix is single-use: delete its topics so repeated runs do not pile up."""
    from streamtts.infra.topics import drop_topics

    error = await drop_topics(dataclasses.replace(settings.kafka, topic_prefix=prefix))
    if error:  # leftovers are harmless; never fail a finished bench on cleanup
        say(f"could not delete topics of {prefix}: {error}")


def log_bytes(settings: Settings, prefix: str) -> dict[str, int]:
    """Bytes in the local broker's log segments of each topic under `prefix` (what the runs
    wrote to Kafka: records with their batch framing). Empty when the broker is not local."""
    try:
        from streamtts.infra.local.stack import LocalStack

        data = LocalStack.from_settings(settings).kafka.data_dir
    except Exception:
        return {}
    out: dict[str, int] = {}
    for part in data.glob(f"{prefix}*-*"):
        topic = part.name[len(prefix) :].rsplit("-", 1)[0]
        out[topic] = out.get(topic, 0) + sum(f.stat().st_size for f in part.glob("*.log"))
    return out


def pipeline_cpu_s(usage: dict[str, ProcUsage]) -> float:
    """CPU seconds of the pipeline's processes (workers, broker, MinIO): not the bench client
    nor the rest of the machine."""
    return sum(u.cpu_s for k, u in usage.items() if k not in ("bench", OTHERS))


def wire_measures(run: LoadRun, inference_s: float, grown: dict[str, int]) -> dict[str, Any]:
    """Per completed request and per second of audio delivered, for the wire table."""
    n = max(run.summary.completed, 1)
    audio_s = max(sum(r.audio_s for r in run.records if r.completed_at is not None), 1e-9)
    pipeline = {k: u.cpu_s for k, u in run.usage.items() if k not in ("bench", OTHERS)}
    total = pipeline_cpu_s(run.usage)
    return {
        "requests": run.summary.completed,
        "audio_s": round(audio_s, 2),
        "cpu_ms_per_request": {k: round(v / n * 1000, 1) for k, v in pipeline.items()},
        "subscriber_cpu_ms_per_request": round(run.usage["bench"].cpu_s / n * 1000, 1)
        if "bench" in run.usage
        else None,
        "inference_cpu_ms_per_request": round(inference_s / n * 1000, 1),
        "outside_inference_cpu_ms_per_request": round((total - inference_s) / n * 1000, 1),
        "kafka_bytes_per_audio_s": {t: round(b / audio_s) for t, b in sorted(grown.items()) if b > 0},
    }


WARM_BROKER_S = 180.0
"""A local broker younger than this is still JIT-compiling: measured 2026-12-05, a Kafka JVM
a minute old took 24 % of a core under a Piper load that a 4-minute-old one served with 12 %,
and the pipeline gave 0.88-0.93x direct against 1.01x (docs/performance.md)."""


def broker_note(age_s: float | None) -> str:
    """The report's line on the local broker's age: a warning when it was still warming up."""
    if age_s is None:
        return ""
    note = f"Local Kafka up {age_s / 60:.1f} min at the start"
    if age_s < WARM_BROKER_S:
        note += (
            " — still warming up (its JIT takes CPU from the first minutes' loads: fewer req/s "
            "and later first audio than a warm broker gives; see docs/performance.md)"
        )
    return note + "."


def infra_pids(settings: Settings) -> dict[str, int]:
    """Local Kafka/MinIO pids (their CPU is part of the pipeline's cost), if this clone runs them."""
    try:
        from streamtts.infra.local.stack import LocalStack

        return {s.name: s.pid for s in LocalStack.from_settings(settings).status() if s.pid and s.ready}
    except Exception:
        return {}


def machine() -> dict[str, Any]:
    import platform
    import subprocess

    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
            cwd=Path(__file__).resolve().parent.parent,
        ).stdout.strip()
    except OSError:
        commit = ""
    if not commit:  # a `git archive` copy: git wrote the commit into this file (export-subst)
        stamped = Path(__file__).with_name("COMMIT")
        text = stamped.read_text().strip() if stamped.exists() else ""
        commit = "" if text.startswith("$Format") else text
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": round(mem_gb, 1),
        "python": platform.python_version(),
        "commit": commit,
    }


def pool_rounds(runs: list[LoadRun]) -> list[LoadRun]:
    """Runs of the same arm (`extra["arm"]`) as one, in the order the arms first ran: its
    records together (throughput over the rounds' summed wall time) and each measure of
    `extra` the mean over its rounds (they send the same texts). An arm run once is as it was."""
    by_arm: dict[str, list[LoadRun]] = {}
    for run in runs:
        by_arm.setdefault(str(run.extra.get("arm")), []).append(run)
    pooled = []
    for arm, rounds in by_arm.items():
        if len(rounds) == 1:
            pooled.append(rounds[0])
            continue
        records = [rec for r in rounds for rec in r.records]
        merged = dataclasses.replace(
            rounds[0],
            summary=summarize(records, wall_s=sum(r.summary.wall_s for r in rounds)),
            records=records,
            extra=_mean_extra([r.extra for r in rounds]) | {"arm": arm, "round": None, "rounds": len(rounds)},
        )
        pooled.append(merged)
    return pooled


def _mean_extra(extras: list[dict[str, Any]]) -> dict[str, Any]:
    """Numbers averaged key by key, nested dicts too (a key missing from a round counts as
    absent there, not as 0); anything else as in the first round."""
    out: dict[str, Any] = {}
    for key in dict.fromkeys(k for e in extras for k in e):
        values = [e[key] for e in extras if key in e]
        if all(isinstance(v, dict) for v in values):
            out[key] = _mean_extra(values)
        elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            out[key] = round(sum(values) / len(values), 1)
        else:
            out[key] = values[0]
    return out
