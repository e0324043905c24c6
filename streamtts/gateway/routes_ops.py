"""Probes, metrics, voices, the OpenAPI document, the web page and the pipeline summary."""

from __future__ import annotations

import asyncio
import html
import time
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from streamtts.audio import formats
from streamtts.gateway.errors import ApiError
from streamtts.gateway.http import gateway
from streamtts.gateway.openapi import openapi_document
from streamtts.gateway.service import Gateway
from streamtts.gateway.voices import OPENAI_VOICES
from streamtts.runtime.ops_server import bearer_matches

# Worker metrics the page shows: sample name → label to group by (None: one total).
PIPELINE_SAMPLES: dict[str, str | None] = {
    "streamtts_requests_completed_total": "status",
    "streamtts_dead_letters_total": "stage",
    "streamtts_inflight": "stage",
    "streamtts_consumer_lag": None,
    "streamtts_degradations_total": "step",
    "streamtts_time_to_first_audio_seconds_sum": None,
    "streamtts_time_to_first_audio_seconds_count": None,
    "streamtts_audio_seconds_total": None,
}


async def healthz(request: Request) -> Response:
    gw = gateway(request)
    return JSONResponse({"status": "ok", "uptime_s": round(time.monotonic() - gw.started_at, 1)})


async def readyz(request: Request) -> Response:
    gw = gateway(request)
    problems = [] if gw.fanout.healthy else ["output-topic consumer is not polling"]
    if not gw.broker.reachable:
        problems.append(f"no Kafka broker reachable for {gw.broker.down_for:.0f} s ({gw.broker.last_error})")
    return JSONResponse({"ready": not problems, "problems": problems}, status_code=503 if problems else 200)


async def metrics(request: Request) -> Response:
    """Prometheus text, or OpenMetrics (exemplars) when the Accept header asks for it; with
    STREAMTTS_METRICS_TOKEN set, only for `Bearer <token>`."""
    gw = gateway(request)
    token = gw.pipeline.metrics_token
    if token and not bearer_matches(request.headers.get("authorization"), token):
        raise ApiError(
            401,
            "unauthorized",
            "/metrics needs Authorization: Bearer <metrics token>",
            {"WWW-Authenticate": 'Bearer realm="metrics"'},
        )
    body, content_type = gw.metrics.exposition_for(request.headers.get("accept"))
    return Response(body, headers={"Content-Type": content_type})


async def voices(request: Request) -> Response:
    gw = gateway(request)
    return JSONResponse(
        {
            "voices": list(gw.voices.voices),
            "languages": list(gw.voices.languages),
            "openai_voices": dict(OPENAI_VOICES),
            "formats": [
                {"format": c.name, "content_type": c.content_type, "default_rate": c.default_rate}
                for c in formats.codecs()
            ],
        }
    )


async def openapi(request: Request) -> Response:
    gw = gateway(request)
    return JSONResponse(openapi_document(gw.settings, gw.voices.ids))


TRACE_UI_MARK = "__STREAMTTS_TRACE_UI__"
"""Where the page's `<meta name="streamtts-trace-ui">` gets the tracing UI's URL."""


async def index(request: Request) -> Response:
    gw = gateway(request)
    # A trace link only where this gateway's spans go somewhere (else it would lead nowhere).
    trace_ui = gw.settings.trace_ui_url if gw.tracing.recording else ""
    return HTMLResponse(page_html(trace_ui), headers={"Cache-Control": "no-cache"})


def page_html(trace_ui: str) -> str:
    """The web page, told which tracing UI to link finished requests' traces in ("": none)."""
    page = resources.files("streamtts.gateway").joinpath("static/index.html").read_text(encoding="utf-8")
    return page.replace(TRACE_UI_MARK, html.escape(trace_ui, quote=True))


PIPELINE_CACHE_S = 1.0
"""/v1/pipeline is computed at most once a second, however many clients poll it."""


async def pipeline(request: Request) -> Response:
    """The gateway's counters plus a summary of each configured worker's /metrics."""
    gw = gateway(request)
    async with gw.pipeline_lock:  # single flight: concurrent polls share one scrape
        cached = gw.pipeline_summary
        if cached is None or time.monotonic() - cached[0] > PIPELINE_CACHE_S:
            cached = gw.pipeline_summary = (time.monotonic(), await _pipeline_summary(gw))
    return JSONResponse(cached[1])


async def _pipeline_summary(gw: Gateway) -> dict[str, Any]:
    token = gw.pipeline.metrics_token
    workers = await asyncio.gather(*(_scrape(u, token) for u in gw.settings.worker_metrics_urls))
    own = await asyncio.to_thread(  # parsing expositions is CPU work: off the event loop
        _summarise,
        gw.metrics.exposition().decode(),
        {
            "streamtts_gateway_submitted_total": "endpoint",
            "streamtts_gateway_rejected_total": "code",
            "streamtts_gateway_ws_sessions": None,
            "streamtts_gateway_cache_entries": None,
            "streamtts_gateway_time_to_first_audio_seconds_sum": None,
            "streamtts_gateway_time_to_first_audio_seconds_count": None,
        },
    )
    return {"gateway": own, "workers": workers, "ready": gw.fanout.healthy}


async def _scrape(url: str, token: str | None) -> dict[str, Any]:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with httpx.AsyncClient(timeout=2.0) as client:
            resp = await client.get(url, headers=headers)
            resp.raise_for_status()
    except httpx.HTTPError as err:
        return {"url": url, "up": False, "error": type(err).__name__}
    summary = await asyncio.to_thread(_summarise, resp.text, PIPELINE_SAMPLES)
    return {"url": url, "up": True, "metrics": summary}


def _summarise(text: str, wanted: dict[str, str | None]) -> dict[str, Any]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, Any] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name not in wanted:
                continue
            label = wanted[s.name]
            if label is None:
                out[s.name] = out.get(s.name, 0.0) + s.value
            else:
                group = out.setdefault(s.name, {})
                key = s.labels.get(label, "")
                group[key] = group.get(key, 0.0) + s.value
    return out


routes = [
    Route("/", index, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
    Route("/openapi.json", openapi, methods=["GET"]),
    Route("/v1/voices", voices, methods=["GET"]),
    Route("/v1/pipeline", pipeline, methods=["GET"]),
]
