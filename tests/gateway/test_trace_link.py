"""A finished request leads to its trace: the web page links it (in the tracing UI the gateway
names), the WebSocket's `completed` event carries its trace id, and the gateway's first-audio
histogram carries it as an exemplar in /metrics' OpenMetrics form. No Kafka: the app is never
started (no lifespan), its requests' states are made by hand; the page's script runs in Chromium."""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streamtts.gateway.app import create_app
from streamtts.gateway.request_state import RequestState
from streamtts.gateway.routes_ops import page_html
from streamtts.gateway.service import Gateway
from streamtts.gateway.settings import GatewaySettings
from streamtts.gateway.ws_events import completed_event, sentence_base
from streamtts.runtime.settings import KafkaSettings, S3Settings, Settings
from streamtts.runtime.tracing import Tracing, TracingSettings
from streamtts.schemas.trace import TraceContext

UI = "http://jaeger.example:16686"
OPENMETRICS = {"Accept": "application/openmetrics-text; version=1.0.0"}


async def _client(gw: Gateway, settings: GatewaySettings) -> AsyncIterator[httpx.AsyncClient]:
    pipeline = Settings(kafka=KafkaSettings(), s3=S3Settings())  # never connected: no lifespan
    app = create_app(settings, pipeline, gateway=gw)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        yield client


def _gateway(*, recording: bool) -> tuple[Gateway, GatewaySettings]:
    settings = GatewaySettings(api_keys={"key-acme": "acme"}, trace_ui_url=UI)
    gw = Gateway.build(settings, Settings(kafka=KafkaSettings(), s3=S3Settings()))
    if recording:
        gw.tracing = Tracing.to(TracingSettings(), "gateway", exporter=InMemorySpanExporter())
    return gw, settings


def _finished(trace: TraceContext) -> RequestState:
    state = RequestState("s1-0", "acme", "pcm", expects_result=False, traceparent=trace.traceparent)
    state.first_chunk_at = state.submitted_at + 0.25
    return state


async def test_the_page_names_the_trace_ui_only_while_the_gateway_records_spans() -> None:
    for recording, shown in ((True, UI), (False, "")):
        gw, settings = _gateway(recording=recording)
        async for client in _client(gw, settings):
            page = (await client.get("/")).text
        assert f'<meta name="streamtts-trace-ui" content="{shown}">' in page, recording
    # The URL is written into an attribute: escaped.
    assert 'content="http://x/?a=1&amp;b=&quot;2&quot;"' in page_html('http://x/?a=1&b="2"')


async def test_a_sampled_request_names_its_trace_in_completed_and_in_the_first_audio_exemplar() -> None:
    gw, settings = _gateway(recording=True)
    sampled, unsampled = TraceContext.start(), TraceContext.start(sampled=False)
    assert gw.trace_id(_finished(sampled)) == sampled.trace_id
    assert gw.trace_id(_finished(unsampled)) is None  # no spans in the backend: nothing to link
    assert _gateway(recording=False)[0].trace_id(_finished(sampled)) is None

    state = _finished(sampled)
    event = completed_event(sentence_base(state.request_id), state, gw.trace_id(state))
    assert event["trace_id"] == sampled.trace_id and event["index"] == 0
    assert "trace_id" not in completed_event(sentence_base("s1-1"), state, None)

    gw.observe_first_audio("ws", state)
    async for client in _client(gw, settings):
        om = await client.get("/metrics", headers=OPENMETRICS)
        plain = await client.get("/metrics")
    assert om.headers["content-type"].startswith("application/openmetrics-text")
    assert f'# {{trace_id="{sampled.trace_id}"}} 0.25'.encode() in om.content
    assert plain.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert b"streamtts_gateway_time_to_first_audio_seconds_bucket" in plain.content
    assert b"trace_id" not in plain.content  # exemplars are OpenMetrics only


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.mark.integration
async def test_the_page_links_a_completed_sentence_to_its_trace_in_chromium() -> None:
    """The page's own script: a `completed` event with a trace id becomes a link into the UI
    and the `streamtts trace ID` command; without a UI (tracing off) nothing is drawn."""
    from playwright.async_api import Route, async_playwright

    assert Path(CHROMIUM).exists(), "needs Debian's Chromium: apt-get install chromium"
    trace_id = TraceContext.start().trace_id
    completed = {"type": "completed", "request_id": "s1-0", "index": 0, "trace_id": trace_id}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        try:
            page = await browser.new_page()
            served = {"html": page_html(UI + "/")}

            async def gateway_stub(route: Route) -> None:  # the page as `/` serves it; no API
                if route.request.url == "http://gw/":
                    await route.fulfill(body=served["html"], content_type="text/html")
                else:
                    await route.fulfill(status=404, json={"error": "not_found"})

            await page.route("http://gw/**", gateway_stub)
            await page.goto("http://gw/")
            await page.evaluate("m => addTrace(m)", completed)
            href = await page.get_attribute("#traces a", "href")
            line = await page.text_content("#traces")
            served["html"] = page_html("")
            await page.goto("http://gw/")
            await page.evaluate("m => addTrace(m)", completed)
            without = await page.inner_html("#traces")
        finally:
            await browser.close()
    assert href == f"{UI}/trace/{trace_id}"
    assert line is not None and re.fullmatch(rf"sentence 0: trace · streamtts trace {trace_id}", line), line
    assert without == ""
