"""A request through the gateway is one trace in a real backend (#43's done-when): the whole
pipeline and the gateway export OTLP/HTTP to the local Jaeger (`infra up --tracing`'s build),
an OpenAI call carries the caller's `traceparent`, and Jaeger's own query API — read here with
plain httpx — holds one trace under the caller's trace id with a span for every stage the
request crossed, whose times account for what the client measured. `streamtts trace ID`
prints it as a waterfall."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from streamtts.cli.main import main
from streamtts.runtime.tracing import Tracing, TracingSettings
from tests.gateway.conftest import ACME
from tests.gateway.served import Served

pytestmark = [pytest.mark.integration, pytest.mark.model]

TRACE_ID = "8a3c60f7d188f8fa79d48a391a778fa6"
CALLER = f"00-{TRACE_ID}-53995c3f42cd8ad8-01"
STAGES = (
    "gateway openai",
    "gateway first audio",
    "gateway last audio",
    "process segment",
    "process synthesize",
    "process encode",
)


async def _trace(query_url: str, want: set[str]) -> dict[str, Any]:
    """The trace from Jaeger's query API once every span named in `want` is in (a backend
    stores spans a moment after they are exported)."""
    async with httpx.AsyncClient(base_url=query_url, timeout=10) as client:
        async with asyncio.timeout(30):
            while True:
                response = await client.get(f"/api/traces/{TRACE_ID}")
                if response.status_code == 200:
                    (trace,) = response.json()["data"]
                    if want <= {s["operationName"] for s in trace["spans"]}:
                        return trace
                await asyncio.sleep(0.2)  # polling a remote API: there is no event to await


async def test_a_gateway_call_is_one_trace_in_jaeger_that_accounts_for_its_time(
    running_pipeline, served: Served, jaeger, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = TracingSettings(endpoint=jaeger.otlp_endpoint)
    worker_tracing, gateway_tracing = Tracing.to(settings, "worker"), Tracing.to(settings, "gateway")
    running_pipeline.telemetry.tracing = worker_tracing  # the stages read it per record
    served.gw.tracing = gateway_tracing
    body = {
        "model": "tts-1",
        # Three sentences: a whole answer long enough that the client's own HTTP hops are a
        # small part of its total, as for a real caller.
        "input": (
            "Thank you for calling. An agent will be with you shortly. Please keep your order number at hand."
        ),
        "voice": "alloy",
    }
    async with httpx.AsyncClient(base_url=served.url, timeout=120) as client:
        started = time.perf_counter()
        async with client.stream(
            "POST", "/v1/audio/speech", json=body, headers={**ACME, "traceparent": CALLER}
        ) as response:
            assert response.status_code == 200, await response.aread()
            first_s: float | None = None
            async for part in response.aiter_bytes():
                if first_s is None and part:
                    first_s = time.perf_counter() - started
        total_s = time.perf_counter() - started
    assert first_s is not None
    request_id = response.headers["X-Request-Id"]
    for tracing in (worker_tracing, gateway_tracing):
        await asyncio.to_thread(tracing.provider.force_flush)  # type: ignore[union-attr]

    trace = await _trace(jaeger.query_url, set(STAGES))
    spans = trace["spans"]
    services = {p["serviceName"] for p in trace["processes"].values()}
    assert services == {"streamtts-worker", "streamtts-gateway"}, services
    assert {s["traceID"] for s in spans} == {TRACE_ID}, "one trace: the caller's"
    by_name: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by_name.setdefault(s["operationName"], []).append(s)
    (server,) = by_name["gateway openai"]
    refs = {(r["refType"], r["spanID"]) for r in server["references"]}
    assert ("CHILD_OF", "53995c3f42cd8ad8") in refs, "the gateway's span is the caller's child"
    (first,) = by_name["gateway first audio"]
    t0 = server["startTime"]
    first_audio_s = (first["startTime"] + first["duration"] - t0) / 1e6
    # What the client waited for is the gateway's submit → first chunk plus this process's HTTP
    # hops (parsing, the first write); the spans must account for most of it and never more.
    assert first_audio_s <= first_s, (first_audio_s, first_s)
    assert first_audio_s >= 0.8 * first_s, f"spans account for {first_audio_s:.3f} of {first_s:.3f} s"
    # The whole answer: submit → its last chunk at the gateway, against the client's total.
    (last,) = by_name["gateway last audio"]
    last_audio_s = (last["startTime"] + last["duration"] - t0) / 1e6
    assert last_audio_s <= total_s, (last_audio_s, total_s)
    assert last_audio_s >= 0.95 * total_s, f"spans account for {last_audio_s:.3f} of {total_s:.3f} s"
    measured = (
        f"client first audio {first_s * 1000:.0f} ms, spans {first_audio_s * 1000:.0f} ms "
        f"({first_audio_s / first_s:.1%}); client total {total_s * 1000:.0f} ms, last audio at the "
        f"gateway {last_audio_s * 1000:.0f} ms ({last_audio_s / total_s:.1%})"
    )

    capsys.readouterr()
    status = main(["trace", request_id, "--url", jaeger.query_url])
    out, err = capsys.readouterr()
    assert status == 0, err
    with capsys.disabled():  # the numbers and the waterfall, for whoever reads the log
        print(f"\n{measured}\n{out}")
    assert f"trace {TRACE_ID}" in out
    for name in ("process segment", "process synthesize", "process encode"):
        assert name in out
