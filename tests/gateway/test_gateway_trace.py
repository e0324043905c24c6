"""The gateway continues a caller's trace (#43): an OpenAI speech call sent with a W3C
`traceparent` is answered with the same trace id, and the gateway's spans and every stage's
are one trace under the caller's span. The pipeline, the gateway and the client are real
(Kafka, MinIO, the model, uvicorn, httpx); spans go to the SDK's in-memory exporter.

The gateway's `first audio` span (submit → first chunk at the gateway) is what the client
waits for less the HTTP hops in this process: it must not exceed what the client measured,
and must be most of it."""

from __future__ import annotations

import time

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streamtts.runtime.tracing import Tracing, TracingSettings
from streamtts.schemas.trace import parse_traceparent
from tests.gateway.conftest import ACME
from tests.gateway.served import Served

pytestmark = [pytest.mark.integration, pytest.mark.model]

CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def test_an_openai_call_with_a_traceparent_is_one_trace_through_every_stage(
    running_pipeline, served: Served
) -> None:
    exporter = InMemorySpanExporter()
    tracing = Tracing.to(TracingSettings(), "test", exporter=exporter)
    served.gw.tracing = tracing
    running_pipeline.telemetry.tracing = tracing  # the stages read it per record
    body = {
        "model": "tts-1",
        "input": "Your table is ready. Please come to the front desk.",
        "voice": "alloy",
    }
    headers = {**ACME, "traceparent": CALLER, "tracestate": "vendor=1"}
    async with httpx.AsyncClient(base_url=served.url, timeout=120) as client:
        started = time.perf_counter()
        async with client.stream("POST", "/v1/audio/speech", json=body, headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            first_byte_s: float | None = None
            size = 0
            async for part in response.aiter_bytes():
                if first_byte_s is None and part:
                    first_byte_s = time.perf_counter() - started
                size += len(part)
    assert first_byte_s is not None and size > 1000
    answered = parse_traceparent(response.headers["traceparent"])
    assert answered is not None and answered.trace_id == "0af7651916cd43dd8448eb211c80319c"

    trace_id = int(answered.trace_id, 16)
    spans = [s for s in exporter.get_finished_spans() if s.context.trace_id == trace_id]
    names = {s.name for s in spans}
    assert {"gateway openai", "gateway first audio", "process segment", "process synthesize"} <= names, names
    assert "process encode" in names
    (server,) = [s for s in spans if s.name == "gateway openai"]
    assert server.parent is not None and server.parent.span_id == int("b7ad6b7169203331", 16)
    (segment,) = [s for s in spans if s.name == "process segment"]
    assert segment.parent is not None and segment.parent.span_id == server.context.span_id
    (first,) = [s for s in spans if s.name == "gateway first audio"]
    assert first.end_time is not None and first.start_time is not None
    waited_s = (first.end_time - first.start_time) / 1e9
    assert waited_s <= first_byte_s, "the gateway saw the chunk before the client did"
    assert waited_s >= 0.5 * first_byte_s, (waited_s, first_byte_s)
    print(f"first audio: client {first_byte_s * 1000:.0f} ms, gateway span {waited_s * 1000:.0f} ms")
