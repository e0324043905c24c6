"""W3C trace context on records: one trace per request, whatever processes it crosses.

Carried as the CloudEvents distributed-tracing extension (`ce_traceparent`, `ce_tracestate`)
on every record the pipeline writes for a request: the request, its segments, its PCM and
audio chunks, its result; its dead letters keep them (a dead letter keeps the record's own
headers). A replay starts a new trace and names the one it replays in `REPLAY_TRACE` (a span
link, for a tracing backend). Pure: parsing and formatting only, no tracing SDK here.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from streamtts.schemas.headers import (
    REPLAY_TRACE,
    TRACE_HEADERS,
    TRACEPARENT,
    TRACESTATE,
    carried_headers,
    header,
    header_pairs,
)

MAX_TRACESTATE_CHARS = 512
"""W3C: a vendor may drop tracestate longer than 512 characters; we keep at most that."""

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
# W3C tracestate: a key is a tenant name (lower-case letter first) or tenant@system; a value is
# printable ASCII without "," or "=", not ending in a space.
_TRACESTATE_KEY = re.compile(
    r"[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13}"
)
_TRACESTATE_VALUE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")


@dataclass(frozen=True)
class TraceContext:
    """A position in a trace: its id, the parent span's id, its flags and vendor state."""

    trace_id: str
    """32 lower-case hex digits, not all zero."""
    span_id: str
    """16 lower-case hex digits, not all zero: the span the next one is a child of."""
    flags: str = "01"
    """Two hex digits; bit 0: sampled."""
    state: str = ""
    """`tracestate`, passed on as it came (validated, at most `MAX_TRACESTATE_CHARS`)."""

    @classmethod
    def start(cls, sampled: bool = True, *, sample_ratio: float | None = None) -> TraceContext:
        """A new trace (what a request that came without one begins). sample_ratio: the
        sampled flag is decided from the trace id as OpenTelemetry's `TraceIdRatioBased`
        decides it (its lower 64 bits below ratio × 2^64), so the deployment's ratio applies
        to the traces we begin too: with the flag always set, every process's parent-based
        sampler would record every request whatever the ratio."""
        trace_id = secrets.token_hex(16)
        if sample_ratio is not None:
            sampled = int(trace_id[16:], 16) < round(min(max(sample_ratio, 0.0), 1.0) * 2**64)
        return cls(trace_id, secrets.token_hex(8), "01" if sampled else "00")

    def child(self) -> TraceContext:
        """The same trace, a new span id (what a hop writes as its parent)."""
        return TraceContext(self.trace_id, secrets.token_hex(8), self.flags, self.state)

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{self.flags}"

    @property
    def sampled(self) -> bool:
        return bool(int(self.flags, 16) & 1)

    def headers(self) -> list[tuple[str, bytes]]:
        """As record headers (`ce_traceparent`, and `ce_tracestate` if there is one)."""
        out = [(TRACEPARENT, self.traceparent.encode())]
        if self.state:
            out.append((TRACESTATE, self.state.encode()))
        return out


def parse_traceparent(
    value: str | bytes | None, tracestate: str | bytes | None = None
) -> TraceContext | None:
    """The context of a W3C `traceparent` (and `tracestate`), or None if it is absent or
    invalid: an invalid one is ignored and a new trace started, as the W3C spec says (never an
    error for the caller). A version above 00 is read by the 00 layout (forward compatible)."""
    if value is None:
        return None
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    m = _TRACEPARENT.fullmatch(text.strip())
    if m is None:
        return None
    version, trace_id, span_id, flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest) or set(trace_id) == {"0"} or set(span_id) == {"0"}:
        return None
    return TraceContext(trace_id, span_id, flags, _valid_state(tracestate))


def _valid_state(value: str | bytes | None) -> str:
    """`tracestate` if every list member is well-formed and it is not too long; else "" (the
    spec lets a receiver drop what it cannot vouch for)."""
    if not value:
        return ""
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    if len(text) > MAX_TRACESTATE_CHARS:
        return ""
    members = [m.strip() for m in text.split(",") if m.strip()]
    keys = [m.partition("=")[0] for m in members]
    if len(members) > 32 or len(set(keys)) != len(keys):
        return ""  # a key twice: the list is malformed (W3C)
    for member in members:
        key, sep, value = member.partition("=")
        if not sep or not _TRACESTATE_KEY.fullmatch(key) or not _TRACESTATE_VALUE.fullmatch(value):
            return ""
    return ",".join(members)


def trace_of(headers: object) -> TraceContext | None:
    """The trace context a record carries (see `headers.header_pairs` for `headers`)."""
    return parse_traceparent(header(headers, TRACEPARENT), header(headers, TRACESTATE))


def replay_trace(original: object) -> list[tuple[str, bytes]]:
    """The trace headers of a replay of a record with headers `original`: a new trace (a
    replay is new work, with its own timing), linked to the original's by `REPLAY_TRACE`."""
    headers = TraceContext.start().headers()
    was = header(original, TRACEPARENT)
    if was is not None and parse_traceparent(was) is not None:
        headers.append((REPLAY_TRACE, was))
    return headers


def without_trace(headers: object) -> list[tuple[str, bytes]]:
    """`headers` less any trace context (a replay writes its own)."""
    return [(k, v) for k, v in header_pairs(headers) if k not in TRACE_HEADERS]


def carried_with_trace(headers: object) -> list[tuple[str, bytes]]:
    """`carried_headers(headers)` with a valid trace: the record's own, or a new one (a
    producer that sets none, or an unreadable one). What the first stage passes on, so every
    record downstream carries a trace."""
    kept = [(k, v) for k, v in carried_headers(headers) if k not in (TRACEPARENT, TRACESTATE)]
    return [*kept, *(trace_of(headers) or TraceContext.start()).headers()]


def from_http(headers: Mapping[str, str]) -> TraceContext | None:
    """The caller's trace context from HTTP (or WebSocket upgrade) headers, if valid."""
    return parse_traceparent(headers.get("traceparent"), headers.get("tracestate"))
