"""`streamtts trace ID`: a finished request's waterfall, from the tracing backend's query API."""

from __future__ import annotations

import argparse

HELP = "print a request's trace as a waterfall (from Jaeger: `infra up --tracing`)"
DESCRIPTION = (
    "Every record of a request carries its W3C trace context and every stage records a "
    "span (with STREAMTTS_OTLP_ENDPOINT set). This prints the request's spans as a "
    "waterfall: where its time went, hop by hop. ID: a request id, or a trace id (32 hex "
    "digits, e.g. from the gateway's `traceparent` answer)."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", metavar="ID", help="request id or trace id")
    p.add_argument(
        "--url", help="the query API (default STREAMTTS_TRACE_QUERY_URL or http://127.0.0.1:16686)"
    )
    p.add_argument(
        "--lookback", type=int, default=24, metavar="HOURS", help="search this far back (default 24)"
    )
    p.add_argument("--json", action="store_true", help="print the spans as JSON lines instead")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from streamtts.runtime.trace_query import fetch_trace, query_url, waterfall

    trace_id, rows = fetch_trace(args.id, url=args.url, lookback_h=args.lookback)
    if args.json:
        for row in rows:
            print(json.dumps(dataclasses.asdict(row), default=str))
        return 0
    print(f"trace {trace_id}  ({len(rows)} spans; {(args.url or query_url())}/trace/{trace_id})")
    for line in waterfall(rows):
        print(line)
    return 0
