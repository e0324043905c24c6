"""Header names the pipeline sets on records (besides the dead-letter ones in `dead_letter`),
and the one way to read headers whatever shape a client hands them in."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

REPLAY_OF = "streamtts.replay.of"
"""What this record replays: "dlq:<topic>/<partition>@<offset>", "request:<id>", "window:<from>..<to>"."""
REPLAY_AT = "streamtts.replay.at"
REPLAY_STAGE = "streamtts.replay.stage"
"""Only this stage should process the record (tts.pcm feeds both encode and sink)."""
FIRST_SEGMENT = "streamtts.segment.first"
"""Set ("1") on a request's first segment: the synthesize stage lets it overtake queued later
segments of other requests without parsing the value."""
FIRST_SEGMENT_HEADERS: list[tuple[str, bytes]] = [(FIRST_SEGMENT, b"1")]
RELEASE = "x-streamtts-release"
"""On a request record: the release that must render it (honoured when the routing rule
allows headers; e.g. a QA client pinning the candidate)."""
TRACEPARENT = "ce_traceparent"
TRACESTATE = "ce_tracestate"
"""W3C trace context as the CloudEvents distributed-tracing extension (see `schemas.trace`)."""
REPLAY_TRACE = "streamtts.replay.traceparent"
"""On a replay's request: the traceparent of what it replays (its new trace links to it)."""


RENDERING_HEADERS = (REPLAY_OF, REPLAY_AT)
"""Carried from a request record to its segments and PCM chunks: which rendering they belong
to (none: the original one; a replay: its own), so the sink tells a deliberate re-render from
a record read twice. `REPLAY_STAGE` is not carried: it targets one consumer of one topic."""


CARRIED_HEADERS = (REPLAY_OF, REPLAY_AT, TRACEPARENT, TRACESTATE, REPLAY_TRACE)
"""What every stage passes on from the record it read to the records it writes for the same
request: which rendering it is, and the request's trace."""


TRACE_HEADERS = (TRACEPARENT, TRACESTATE, REPLAY_TRACE)


def trace_headers(headers: object) -> list[tuple[str, bytes]]:
    """The request's trace among `headers` (what its result carries: see `schemas.trace`)."""
    return [(k, v) for k, v in header_pairs(headers) if k in TRACE_HEADERS]


def carried_headers(headers: object) -> list[tuple[str, bytes]]:
    """The headers among `headers` a stage passes on to its records (`CARRIED_HEADERS`)."""
    return [(k, v) for k, v in header_pairs(headers) if k in CARRIED_HEADERS]


def replay_headers(of: str, stage: str | None = None) -> list[tuple[str, bytes]]:
    headers = [(REPLAY_OF, of.encode()), (REPLAY_AT, datetime.now(UTC).isoformat().encode())]
    if stage:
        headers.append((REPLAY_STAGE, stage.encode()))
    return headers


def header_pairs(headers: object) -> tuple[tuple[str, bytes], ...]:
    """Headers as (name, bytes) pairs, whether the client gave a list or a mapping."""
    if not headers:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    return tuple((str(k), bytes(v) if v is not None else b"") for k, v in items)  # type: ignore[attr-defined]


def header(headers: object, name: str) -> bytes | None:
    for key, value in header_pairs(headers):
        if key == name:
            return value
    return None
