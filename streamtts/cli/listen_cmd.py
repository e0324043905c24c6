"""`streamtts listen`: subscribe to an audio topic, reassemble requests, write their files."""

from __future__ import annotations

import argparse
import sys
from typing import Literal

HELP = "receive streamed audio chunks and write complete files"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--request-id",
        action="append",
        dest="request_ids",
        metavar="ID",
        help="only these requests (repeatable); stops when all are complete",
    )
    p.add_argument("--topic", help="audio topic (default: the pipeline's tts.audio)")
    p.add_argument("--out-dir", default=".", help="folder for the files (default: .)")
    p.add_argument("--from-beginning", action="store_true", help="read the topic from its start")
    p.add_argument("--timeout", type=float, help="stop after this many seconds")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import asyncio

    return asyncio.run(_listen(args))


async def _listen(args: argparse.Namespace) -> int:
    import asyncio
    import time
    from pathlib import Path

    from aiokafka.errors import KafkaError

    from streamtts.audio import formats
    from streamtts.errors import ConfigError, InfraError
    from streamtts.runtime.settings import Settings
    from streamtts.runtime.topics import TopicNames
    from streamtts.schemas.captions import to_vtt
    from streamtts.sinks.subscriber import AudioSubscriber

    settings = Settings.from_env()
    out = Path(args.out_dir)
    try:
        await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"cannot create {out}: {err.strerror or err}") from None
    topic = args.topic or TopicNames(settings.kafka.topic_prefix).audio
    start: Literal["beginning", "end"] = "beginning" if args.from_beginning or args.request_ids else "end"
    sub = AudioSubscriber(settings.kafka, topic, request_ids=args.request_ids, start=start)
    try:
        await sub.start()
    except KafkaError as err:
        raise InfraError(
            f"cannot reach Kafka at {settings.kafka.bootstrap_servers} ({type(err).__name__})"
        ) from None
    count = 0
    began = time.monotonic()
    try:
        async for audio in sub.completed(timeout_s=args.timeout):
            path = out / f"{audio.request_id}{formats.get(audio.format).extension}"
            await asyncio.to_thread(path.write_bytes, audio.data)
            count += 1
            degraded = f" degraded={len(audio.degraded)}" if audio.degraded else ""
            words = audio.words
            captions = ""
            if words is not None:  # the request asked for timestamps: captions beside it
                vtt = path.with_suffix(".vtt")
                await asyncio.to_thread(vtt.write_text, to_vtt(words), "utf-8")
                captions = f"  {vtt} ({len(words)} words)"
            print(
                f"{path}  {audio.duration_ms / 1000:.2f}s  {len(audio.chunks)} chunks{degraded}{captions}",
                flush=True,
            )
    finally:
        await sub.stop()
    if args.request_ids and count < len(set(args.request_ids)):
        print(
            f"streamtts: error: {len(set(args.request_ids)) - count} request(s) not complete after "
            f"{time.monotonic() - began:.0f} s",
            file=sys.stderr,
        )
        return 1
    return 0
