"""A request's trace from a tracing backend's query API (Jaeger's HTTP API, which the local
`infra up --tracing` starts), as a list of spans ready to draw as a waterfall."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx

from streamtts.errors import ConfigError
from streamtts.runtime.env_vars import ENV_PREFIX

DEFAULT_QUERY_URL = "http://127.0.0.1:16686"
TRACE_ID = re.compile(r"[0-9a-f]{32}")
WORKER_SERVICE = "streamtts-worker"
"""The service every stage's spans are under (`Tracing.to(…, "worker")`)."""


def query_url() -> str:
    """Where the query API is (STREAMTTS_TRACE_QUERY_URL; default: the local Jaeger)."""
    return (os.environ.get(ENV_PREFIX + "TRACE_QUERY_URL") or DEFAULT_QUERY_URL).rstrip("/")


@dataclass(frozen=True)
class SpanRow:
    """One span of a trace: what the waterfall draws."""

    span_id: str
    parent_id: str | None
    name: str
    service: str
    start_us: int
    duration_us: int
    tags: dict[str, Any]

    @property
    def end_us(self) -> int:
        return self.start_us + self.duration_us


class TraceNotFound(ConfigError):
    """No trace for that id (yet: a backend indexes spans a few seconds after they end)."""


def fetch_trace(ident: str, *, url: str | None = None, lookback_h: int = 24) -> tuple[str, list[SpanRow]]:
    """The spans of trace `ident` (32 hex digits) or of request `ident` (its spans' tag
    `streamtts.request_id`), in start order. Raises TraceNotFound, or ConfigError when the
    query API cannot be reached."""
    base = url or query_url()
    try:
        with httpx.Client(base_url=base, timeout=10.0) as client:
            response = None
            if TRACE_ID.fullmatch(ident):
                response = client.get(f"/api/traces/{ident}")
            if response is None or response.status_code == 404:
                # A request id (which may look like a trace id: the gateway's are 32 hex digits).
                tags = json.dumps({"streamtts.request_id": ident})
                start_us = int((time.time() - lookback_h * 3600) * 1e6)
                params = {"service": WORKER_SERVICE, "tags": tags, "limit": "1", "start": str(start_us)}
                response = client.get("/api/traces", params=params)
    except (httpx.HTTPError, httpx.InvalidURL) as err:
        why = type(err).__name__
        raise ConfigError(f"cannot reach the trace query API at {base} ({why}): is it up?") from None
    if response.status_code == 404:
        raise TraceNotFound(f"no trace {ident!r} at {base}")
    if response.status_code != 200:
        answer = f"{response.status_code}: {response.text[:200]}"
        raise ConfigError(f"the trace query API at {base} answered {answer}")
    try:
        data = response.json().get("data") or []
        if data:
            data[0]["traceID"]  # the shape of Jaeger's answer, checked
    except (ValueError, AttributeError, LookupError, TypeError):
        raise ConfigError(f"{base} did not answer as Jaeger's query API does") from None
    if not data:
        raise TraceNotFound(
            f"no trace for {ident!r} at {base} (spans are indexed a few seconds after they end)"
        )
    return data[0]["traceID"], parse_jaeger(data[0])


def parse_jaeger(trace: dict[str, Any]) -> list[SpanRow]:
    """Jaeger's JSON trace (its `/api/traces` model) as rows, in start order."""
    processes = {pid: p.get("serviceName", "?") for pid, p in (trace.get("processes") or {}).items()}
    rows = []
    for span in trace.get("spans") or []:
        parent = next(
            (r["spanID"] for r in span.get("references") or [] if r.get("refType") == "CHILD_OF"), None
        )
        rows.append(
            SpanRow(
                span_id=span["spanID"],
                parent_id=parent,
                name=span.get("operationName", "?"),
                service=processes.get(span.get("processID", ""), "?"),
                start_us=int(span["startTime"]),
                duration_us=int(span.get("duration", 0)),
                tags={t["key"]: t.get("value") for t in span.get("tags") or []},
            )
        )
    return sorted(rows, key=lambda r: (r.start_us, -r.duration_us))


def waterfall(rows: list[SpanRow], width: int = 40) -> list[str]:
    """The trace as text: one line per span, indented under its parent, with its start and
    duration from the trace's start and a bar on the trace's time line."""
    if not rows:
        return []
    t0 = min(r.start_us for r in rows)
    total = max(max(r.end_us for r in rows) - t0, 1)
    ids = {r.span_id for r in rows}
    children: dict[str | None, list[SpanRow]] = {}
    for r in rows:
        children.setdefault(r.parent_id if r.parent_id in ids else None, []).append(r)
    lines = []

    def draw(row: SpanRow, depth: int) -> None:
        left = round((row.start_us - t0) / total * width)
        bar = " " * left + "█" * max(1, round(row.duration_us / total * width))
        label = "  " * depth + row.name
        lines.append(
            f"{(row.start_us - t0) / 1000:9.1f} ms {row.duration_us / 1000:9.1f} ms  "
            f"{bar:<{width + 1}} {label}  [{row.service}]{_detail(row)}"
        )
        for child in children.get(row.span_id, []):
            draw(child, depth + 1)

    for root in children.get(None, []):
        draw(root, 0)
    return lines


def _detail(row: SpanRow) -> str:
    """The few attributes that explain a span's time."""
    keys = (
        "streamtts.seq",
        "streamtts.lane",
        "streamtts.cache",
        "streamtts.queue_wait_ms",
        "messaging.destination.partition.id",
        "messaging.kafka.offset",
    )
    shown = [f"{k.split('.')[-1]}={row.tags[k]}" for k in keys if k in row.tags]
    return f"  {' '.join(shown)}" if shown else ""
