"""The local demo (README's first command): stack, topics, workers, sample requests, audio out."""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import Settings
from streamtts.schemas import CompletionResult, TTSRequest

SAMPLES: tuple[dict[str, object], ...] = (
    {
        "text": "您好，欢迎致电客服中心。请问有什么可以帮您？",
        "language": "zh",
        "format": "mp3",
        "voice": "jm_kumo",
    },
    {
        "text": "Hello! Your order has shipped, and it should arrive on Tuesday.",
        "language": "en",
        "format": "opus",
        "voice": "en_joe",
    },
    {
        "text": "こんにちは。ご注文の商品は明日届きます。",
        "language": "ja",
        "format": "mp3",
        "voice": "jf_alpha",
    },
    {
        "text": "我今天用 Python 写了一个 demo，效果很好。",
        "language": "zh",
        "format": "opus",
        "voice": "auto",
    },
    {
        "text": "Thank you for waiting. 您的订单已经发货了。",
        "language": "auto",
        "format": "flac",
        "voice": "jm_kumo",
    },
    {
        "text": '<speak>Your code is <say-as interpret-as="digits">4821</say-as>.<break time="400ms"/>'
        'Thanks for calling <sub alias="Acme Corporation">ACME</sub>.</speak>',
        "text_type": "ssml",
        "language": "en",
        "format": "wav",
        "voice": "jm_kumo",
    },
)


def say(msg: str) -> None:
    print(f"[demo] {msg}", file=sys.stderr, flush=True)


@dataclass
class Row:
    request: TTSRequest
    sent_at: float
    first_chunk_at: float | None = None
    result: CompletionResult | None = None
    local_file: Path | None = None


def run_demo(out_dir: str, timeout_s: float) -> int:
    from streamtts.infra.local.stack import LocalStack
    from streamtts.infra.topics import apply_topics
    from streamtts.runtime import jsonlog

    jsonlog.configure("WARNING")
    settings = Settings.from_env()
    say("1/4 local stack: Apache Kafka + MinIO (first run installs them)")
    LocalStack.from_settings(settings).up()
    say("2/4 topics from infra/topics.yaml")
    asyncio.run(apply_topics(settings.kafka))
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return asyncio.run(_run_pipeline(settings, Path(out_dir), timeout_s))


async def _run_pipeline(settings: Settings, out: Path, timeout_s: float) -> int:
    from streamtts.audio import formats
    from streamtts.producers.request_producer import RequestProducer
    from streamtts.producers.result_waiter import ResultWaiter
    from streamtts.runtime.topics import TopicNames
    from streamtts.runtime.topology import STAGES
    from streamtts.sinks.subscriber import AudioSubscriber
    from streamtts.worker import Worker

    pipeline = PipelineSettings.from_env()
    pipeline = pipeline.replace(warm_voices=("jm_kumo", "en_joe", "jf_alpha"))
    say("3/4 workers: segment → synthesize → encode → sink (loading and warming the model)")
    worker = Worker(list(STAGES), settings, pipeline)
    started = time.monotonic()
    await worker.start()
    say(f"    workers ready in {time.monotonic() - started:.1f} s")
    rows = [Row(TTSRequest.new(**s), 0.0) for s in SAMPLES]  # type: ignore[arg-type]
    by_id = {r.request.request_id: r for r in rows}
    try:
        say(f"4/4 {len(rows)} sample requests (zh, en, ja, mixed, SSML; mp3, opus, flac, wav)")
        topics = TopicNames(settings.kafka.topic_prefix)
        async with (
            ResultWaiter(settings.kafka) as waiter,
            AudioSubscriber(settings.kafka, topics.audio, request_ids=list(by_id)) as sub,
        ):
            async with RequestProducer(
                settings.kafka, sample_ratio=settings.tracing.sample_ratio
            ) as producer:
                for row in rows:
                    row.sent_at = time.monotonic()
                    await producer.submit(row.request)
            async for audio in sub.completed(timeout_s=timeout_s):
                row = by_id[audio.request_id]
                row.first_chunk_at = audio.first_chunk_at
                row.local_file = out / f"{audio.request_id}{formats.get(audio.format).extension}"
                await asyncio.to_thread(row.local_file.write_bytes, audio.data)
                say(f"    {row.local_file} ({audio.duration_ms / 1000:.1f} s of audio)")
            results = await waiter.wait(list(by_id), timeout_s=60)
        for rid, res in results.items():
            by_id[rid].result = res
    finally:
        await worker.stop()
    _print_table(rows)
    return 0 if all(r.result and r.result.status == "completed" for r in rows) else 1


def _print_table(rows: list[Row]) -> None:
    print(
        f"{'request':<10} {'lang':<5} {'voice':<9} {'fmt':<5} {'audio s':>7} {'first chunk s':>13} "
        f"{'total s':>8}  stored at / written to"
    )
    for r in rows:
        res = r.result
        ttfa = f"{r.first_chunk_at - r.sent_at:.2f}" if r.first_chunk_at else "-"
        total = f"{(res.completed_at - r.request.created_at).total_seconds():.2f}" if res else "-"
        audio_s = f"{res.duration_ms / 1000:.2f}" if res else "-"
        where = f"s3://{res.storage.bucket}/{res.storage.key}" if res and res.storage else "-"
        print(
            f"{r.request.request_id[:8]:<10} {r.request.language:<5} {r.request.voice:<9} "
            f"{r.request.format:<5} {audio_s:>7} {ttfa:>13} {total:>8}  {where}"
        )
        print(f"{'':<10} {'':<5} {'':<9} {'':<5} {'':>7} {'':>13} {'':>8}  {r.local_file or '-'}")
