"""The local demo: bring up the stack, apply topics, submit sample requests, show the result."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from schemas import TTSRequest
from streamtts.settings import Settings

SAMPLES: tuple[dict[str, object], ...] = (
    {"text": "您好，欢迎致电客服中心。请问有什么可以帮您？", "language": "zh", "format": "mp3"},
    {"text": "Hello! Your order has shipped, and it should arrive on Tuesday.", "language": "en", "format": "opus"},
    {"text": "こんにちは。ご注文の商品は明日届きます。", "language": "ja", "format": "mp3"},
    {"text": "我今天用 Python 写了一个 demo，效果很好。", "language": "zh", "format": "opus"},
)


def run_demo(out_dir: str, timeout_s: float) -> int:
    from infra.local.stack import LocalStack

    settings = Settings.from_env()
    print("1/3 local stack (Kafka + MinIO)", file=sys.stderr)
    LocalStack.from_settings(settings).up()
    print("2/3 topics", file=sys.stderr)
    asyncio.run(_apply_topics(settings))
    print("3/3 sample requests", file=sys.stderr)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return asyncio.run(_submit_and_show(settings))


async def _apply_topics(settings: Settings) -> None:
    from infra.topics import apply_spec, load_spec
    from streamtts.kafka import make_admin

    admin = make_admin(settings.kafka)
    await admin.start()
    try:
        await apply_spec(admin, load_spec(prefix=settings.kafka.topic_prefix))
    finally:
        await admin.close()


async def _submit_and_show(settings: Settings) -> int:
    from producers.request_producer import RequestProducer

    requests = [TTSRequest.new(**sample) for sample in SAMPLES]  # type: ignore[arg-type]
    started = time.monotonic()
    async with RequestProducer(settings.kafka) as producer:
        metas = await producer.submit_many(requests)
    print(f"{'request':<34} {'lang':<4} {'fmt':<5} {'topic/partition@offset':<28} text")
    for req, meta in zip(requests, metas, strict=True):
        where = f"{meta.topic}/{meta.partition}@{meta.offset}"
        print(f"{req.request_id:<34} {req.language:<4} {req.format:<5} {where:<28} {req.text[:30]}")
    print(f"{len(requests)} requests acknowledged by Kafka in {time.monotonic() - started:.2f} s", file=sys.stderr)
    return 0
