"""`streamtts submit`: put requests on Kafka from arguments, stdin or a JSONL file."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from streamtts.audio import formats
from streamtts.schemas.names import WAV_CODECS
from streamtts.schemas.request import LANGUAGES

if TYPE_CHECKING:
    from streamtts.producers.inputs import ParsedInput
    from streamtts.runtime.settings import Settings
    from streamtts.schemas import CompletionResult, TTSRequest


HELP = "submit TTS requests (one per TEXT argument, stdin, or --file JSONL)"
DESCRIPTION = "Prints one request id per submitted request on stdout."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("text", nargs="*", metavar="TEXT", help="text to speak; '-' reads stdin")
    p.add_argument("--file", "-f", metavar="JSONL", help="JSON Lines file: one request object per line")
    p.add_argument("--voice", help="voice id or blend (default: auto per language)")
    p.add_argument("--lang", choices=LANGUAGES, help="language hint")
    p.add_argument("--format", choices=formats.names(), help="audio format (default mp3)")
    p.add_argument("--codec", choices=WAV_CODECS, help="for wav: G.711 inside the WAV")
    p.add_argument("--sample-rate", type=int, help="Hz (default 24000; 8000 for G.711)")
    p.add_argument("--speed", type=float)
    p.add_argument("--tenant")
    p.add_argument("--priority", choices=("interactive", "normal", "batch"))
    p.add_argument("--request-id", help="explicit id (single request only)")
    p.add_argument("--reply-topic", help="also publish audio chunks to this topic")
    p.add_argument("--no-chunks", action="store_true", help="do not publish chunks on the audio topic")
    p.add_argument("--no-storage", action="store_true", help="do not store the file in object storage")
    p.add_argument("--presign", action="store_true", help="include a presigned URL in the result")
    p.add_argument(
        "--timestamps",
        action="store_true",
        help="word timestamps: chunks carry their words; with --out, FILE's .vtt is written too",
    )
    p.add_argument("--ssml", action="store_true", help='each TEXT is an SSML document (text_type "ssml")')
    p.add_argument("--lexicon-version", type=int, help="say it with this version of the tenant's lexicon")
    p.add_argument(
        "--deadline-ms",
        type=int,
        help="first audio wanted within this many ms: a request the synthesize workers' reported "
        "queue cannot serve in time is refused (overloaded) instead of sent",
    )
    p.add_argument(
        "--traceparent",
        metavar="TRACEPARENT",
        help="W3C trace context the requests continue (00-<trace id>-<parent span id>-<flags>); "
        "default: each request starts a trace",
    )
    p.add_argument("--tracestate", metavar="TRACESTATE", help="W3C tracestate, with --traceparent")
    p.add_argument("--wait", action="store_true", help="wait for completion results")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait with --wait")
    p.add_argument("--out", metavar="FILE", help="with --wait: write the audio to FILE (single request)")
    p.set_defaults(func=_run)


def _defaults(args: argparse.Namespace) -> dict[str, Any]:
    delivery = {
        "chunks": not args.no_chunks,
        "storage": not args.no_storage,
        "presign": args.presign,
    }
    if args.reply_topic:
        delivery["reply_topic"] = args.reply_topic
    return {
        "voice": args.voice,
        "language": args.lang,
        "format": args.format,
        "codec": args.codec,
        "sample_rate": args.sample_rate,
        "speed": args.speed,
        "tenant": args.tenant,
        "priority": args.priority,
        "delivery": delivery,
        "timestamps": True if args.timestamps else None,
        "text_type": "ssml" if args.ssml else None,
        "lexicon_version": args.lexicon_version,
        "deadline_ms": args.deadline_ms,
    }


def _read_inputs(args: argparse.Namespace) -> ParsedInput:
    from streamtts.errors import ConfigError
    from streamtts.producers.inputs import ParsedInput, parse_jsonl, request_from_fields

    defaults = _defaults(args)
    if args.file and args.text:
        raise ConfigError("give either TEXT arguments or --file, not both")
    if args.file:
        try:
            with open(args.file, "rb") as fh:
                lines = fh.read().splitlines()
        except OSError as err:
            raise ConfigError(f"cannot read {args.file}: {err.strerror or err}") from None
        parsed = parse_jsonl(lines, defaults)
        if not parsed.requests and not parsed.bad_lines:
            raise ConfigError(f"{args.file} holds no requests")
        return parsed
    texts = list(args.text)
    if texts == ["-"] or (not texts and not sys.stdin.isatty()):
        texts = [sys.stdin.buffer.read().decode("utf-8", errors="replace")]
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ConfigError("no text given: pass TEXT, --file FILE.jsonl, or pipe text on stdin")
    if args.request_id and len(texts) > 1:
        raise ConfigError("--request-id needs exactly one request")
    extra = {"request_id": args.request_id} if args.request_id else {}
    from streamtts.schemas import ContractError

    try:
        return ParsedInput([request_from_fields({"text": t, **extra}, defaults) for t in texts], [])
    except ContractError as err:
        raise ConfigError(str(err)) from None


def _run(args: argparse.Namespace) -> int:
    import asyncio

    from streamtts.errors import ConfigError
    from streamtts.schemas.trace import parse_traceparent

    if args.out and not args.wait:
        raise ConfigError("--out needs --wait")
    if args.tracestate and not args.traceparent:
        raise ConfigError("--tracestate needs --traceparent")
    if args.traceparent:
        caller = parse_traceparent(args.traceparent, args.tracestate)
        if caller is None:
            raise ConfigError(
                f"--traceparent {args.traceparent[:80]!r} is not a W3C traceparent "
                "(00-<32 hex>-<16 hex>-<2 hex>)"
            )
        if args.tracestate and not caller.state:
            raise ConfigError(f"--tracestate {args.tracestate[:80]!r} is not a W3C tracestate (k=v,...)")
    parsed = _read_inputs(args)
    if args.out and len(parsed.requests) != 1:
        raise ConfigError("--out writes one file: submit exactly one request")
    for bad in parsed.bad_lines:
        print(f"streamtts: skipped {bad}", file=sys.stderr)
    refused, failed = asyncio.run(_submit(args, parsed.requests)) if parsed.requests else (0, 0)
    if failed:
        print(f"streamtts: error: {failed} request(s) did not complete", file=sys.stderr)
        return 1
    if refused:
        print(
            f"streamtts: error: {refused} request(s) refused as overloaded, "
            f"{len(parsed.requests) - refused} submitted",
            file=sys.stderr,
        )
        return 1
    if parsed.bad_lines:
        print(
            f"streamtts: error: {len(parsed.bad_lines)} invalid line(s) skipped, "
            f"{len(parsed.requests)} submitted",
            file=sys.stderr,
        )
        return 1
    return 0


async def _admitted(settings: Settings, requests: list[TTSRequest]) -> list[TTSRequest]:
    """The requests whose deadline the synthesize workers' load reports admit; each refused
    one is reported on stderr (one line) and not sent."""
    if all(r.deadline_ms is None for r in requests):
        return requests
    import asyncio

    from streamtts.features.admission.view import Admission
    from streamtts.processors.synthesize.registry import VoiceRegistry
    from streamtts.runtime.pipeline_settings import PipelineSettings

    registry = VoiceRegistry(threads=1)  # resolves voices only; loads no model

    def engine(voice: str) -> str:
        try:
            return registry.spec(voice).engine
        except Exception:  # auto or a blend: Kokoro's cost line
            return "kokoro"

    admitted = []
    async with Admission(settings.kafka, PipelineSettings.from_env().text.long_text_chars) as admission:
        await asyncio.wait_for(admission.view.caught_up.wait(), 10)
        for request in requests:
            refusal = admission.check(request, engine(request.voice))
            if refusal is None:
                admitted.append(request)
            else:
                print(f"streamtts: refused {request.request_id}: {refusal.message()}", file=sys.stderr)
    return admitted


async def _submit(args: argparse.Namespace, requests: list[TTSRequest]) -> tuple[int, int]:
    """Send the requests (those admission lets through); returns how many were refused as
    overloaded, and (with --wait) how many did not complete."""
    from aiokafka.errors import KafkaError

    from streamtts.errors import InfraError
    from streamtts.producers.request_producer import RequestProducer
    from streamtts.producers.result_waiter import ResultWaiter
    from streamtts.runtime.settings import Settings
    from streamtts.schemas.trace import parse_traceparent

    settings = Settings.from_env()
    waiter = ResultWaiter(settings.kafka) if args.wait else None
    wanted = len(requests)
    failed = 0
    try:
        requests = await _admitted(settings, requests)
        if not requests:
            return wanted, 0
        if waiter:
            await waiter.start()  # attach before sending: a fast result must not be missed
        async with RequestProducer(settings.kafka, sample_ratio=settings.tracing.sample_ratio) as producer:
            trace = parse_traceparent(args.traceparent, args.tracestate) if args.traceparent else None
            for meta_req in zip(await producer.submit_many(requests, trace=trace), requests, strict=True):
                print(meta_req[1].request_id, flush=True)
        if waiter:
            results = await waiter.wait([r.request_id for r in requests], args.timeout)
            for rid, res in results.items():
                where = f"s3://{res.storage.bucket}/{res.storage.key}" if res.storage else "-"
                if res.status == "failed":
                    failed += 1
                    print(f"{rid} failed: {res.error}", file=sys.stderr)
                else:
                    print(f"{rid} {res.status} {res.duration_ms / 1000:.2f}s {where}", file=sys.stderr)
            if args.out and not failed:
                await _write_out(settings, requests[0], results[requests[0].request_id], args.out)
    except KafkaError as err:
        raise InfraError(
            f"cannot reach Kafka at {settings.kafka.bootstrap_servers} ({type(err).__name__}); "
            "is it running? try `streamtts infra up`"
        ) from None
    finally:
        if waiter:
            await waiter.stop()
    return wanted - len(requests), failed


async def _write_out(settings: Settings, request: TTSRequest, result: CompletionResult, path: str) -> None:
    """Fetch the stored file named by the result's claim check, or rebuild it from the chunks."""
    import asyncio
    from pathlib import Path

    from streamtts.errors import StreamTTSError
    from streamtts.runtime.topics import TopicNames
    from streamtts.schemas.captions import to_vtt
    from streamtts.sinks.object_store import ObjectStore
    from streamtts.sinks.subscriber import AudioSubscriber

    if result.status != "completed":
        raise StreamTTSError(f"request {result.request_id} failed: {result.error}")
    vtt: bytes | None = None
    if result.storage is not None:
        store = ObjectStore(settings.s3)
        data = await asyncio.to_thread(store.get, result.storage.bucket, result.storage.key)
        if result.captions is not None:
            ref = result.captions.vtt
            vtt = await asyncio.to_thread(store.get, ref.bucket, ref.key)
    else:
        topic = request.delivery.reply_topic or TopicNames(settings.kafka.topic_prefix).audio
        async with AudioSubscriber(
            settings.kafka, topic, request_ids=[request.request_id], start="beginning"
        ) as sub:
            got = [a async for a in sub.completed(timeout_s=30)]
        if not got:
            raise StreamTTSError(f"no stored file and no complete chunk stream for {request.request_id}")
        data = got[0].data
        words = got[0].words
        vtt = to_vtt(words).encode() if words is not None else None
    try:
        await asyncio.to_thread(_write_bytes, path, data)
        if vtt is not None:
            await asyncio.to_thread(_write_bytes, str(Path(path).with_suffix(".vtt")), vtt)
    except OSError as err:
        raise StreamTTSError(f"cannot write {path}: {err.strerror or err}") from None
    print(f"wrote {path} ({len(data)} bytes)", file=sys.stderr)
    if vtt is not None:
        print(f"wrote {Path(path).with_suffix('.vtt')} (captions)", file=sys.stderr)


def _write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
