"""A bench result as JSON: targets, overhead, every run with its requests, the capacity
searches step by step. NaN and infinity become null; floats are rounded to 4 places."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from streamtts.bench.bench_plan import BenchResult, LoadRun
from streamtts.bench.targets import overhead, targets


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else round(obj, 4)
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def _run_json(run: LoadRun) -> dict[str, Any]:
    d = {k: v for k, v in dataclasses.asdict(run).items() if k != "records"}
    d["requests"] = [
        {
            "chars": r.chars,
            "lang": r.lang,
            "kind": r.kind,
            "ttfa_s": r.ttfa_s,
            "completion_s": r.completion_s,
            "audio_s": r.audio_s,
            "degraded": r.degraded,
            "lost": r.completed_at is None,
            "traced": r.traced,
        }
        for r in run.records
    ]
    return d


def to_json(result: BenchResult) -> dict[str, Any]:
    return _clean(
        {
            "started_at": result.started_at,
            "wall_s": result.wall_s,
            "machine": result.machine,
            "plan": dataclasses.asdict(result.plan),
            "targets": [dataclasses.asdict(t) for t in targets(result)],
            "overhead": {v: overhead(result, v) for v in result.plan.voices},
            "runs": [_run_json(r) for r in result.runs],
            "capacity": [
                {
                    "voice": c.voice,
                    "rate_rps": c.rate,
                    "stopped": c.stopped,
                    "steps": [
                        {
                            "rate": s.rate,
                            "passed": s.passed,
                            "backlog": s.backlog,
                            "summary": dataclasses.asdict(s.summary),
                        }
                        for s in c.steps
                    ],
                }
                for c in result.capacity
            ],
            "worker_start_s": result.worker_start_s,
            "skipped": result.skipped,
        }
    )


def write_json(result: BenchResult, path: Path) -> None:
    path.write_text(json.dumps(to_json(result), indent=1, ensure_ascii=False) + "\n")
