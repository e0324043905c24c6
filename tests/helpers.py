"""Small helpers shared by the integration tests."""

from __future__ import annotations

import asyncio
import io
import os
import random
import socket
from pathlib import Path
from typing import Any

import av
from prometheus_client.parser import text_string_to_metric_families

from streamtts.runtime.kafka import make_consumer
from streamtts.runtime.settings import KafkaSettings, S3Settings

DEMUX = {
    "mp3": "mp3",
    "opus": "ogg",
    "pcm": "s16le",
    "mulaw": "mulaw",
    "alaw": "alaw",
    "wav": "wav",
    "flac": "flac",
}
"""Each format's FFmpeg demuxer (`ffmpeg -f NAME`)."""


def decoded_seconds(audio: Path | bytes, fmt: str, rate: int) -> float:
    """Seconds of audio FFmpeg's own demuxer and decoder find in a file (PyAV: libavformat, as
    `ffmpeg -f DEMUX -i FILE` would read it; headerless PCM and G.711 need their rate)."""
    options = {"sample_rate": str(rate), "ch_layout": "mono"} if fmt in ("pcm", "mulaw", "alaw") else {}
    source = str(audio) if isinstance(audio, Path) else io.BytesIO(audio)
    with av.open(source, format=DEMUX[fmt], options=options) as container:
        frames = list(container.decode(audio=0))
    return sum(f.samples / f.sample_rate for f in frames)


def cli_env(kafka: KafkaSettings, s3: S3Settings | None = None, **extra: str) -> dict[str, str]:
    """Environment for a `streamtts` subprocess pointed at this test's broker, topics and S3."""
    env = dict(
        os.environ,
        STREAMTTS_KAFKA_BOOTSTRAP=kafka.bootstrap_servers,
        STREAMTTS_TOPIC_PREFIX=kafka.topic_prefix,
    )
    if s3 is not None:
        env.update(
            STREAMTTS_S3_ENDPOINT=s3.endpoint,
            STREAMTTS_S3_ACCESS_KEY=s3.access_key,
            STREAMTTS_S3_SECRET_KEY=s3.secret_key,
        )
    env.update({f"STREAMTTS_{k.upper()}": v for k, v in extra.items()})
    return env


def metric(text: str, sample: str, **labels: str) -> float:
    """Sum of the samples named `sample` (e.g. `x_total`, `x_count`) whose labels include
    `labels`, in a Prometheus text exposition; 0.0 when none."""
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
    )


async def topic_records(kafka: KafkaSettings, topic: str, count: int, *, timeout_s: float) -> list[Any]:
    """The first `count` records of `topic`, read from the beginning by a plain consumer with no
    group (waits for them; TimeoutError past `timeout_s`)."""
    consumer = make_consumer(kafka, topic, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    out: list[Any] = []
    try:
        async with asyncio.timeout(timeout_s):
            while len(out) < count:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    out += records
    finally:
        await consumer.stop()
    return out


TEST_PORTS_AVOIDED = frozenset({29092, 29000, 39092, 39000})
FREE_PORTS_BELOW = 31_000
"""Free ports are drawn from 20000 up to here; the three-broker test cluster sits above it
(31092-31094, controllers 31192-31194), below the kernel's ephemeral range."""


def free_port_pair() -> int:
    """Two free adjacent ports (Kafka's listener and controller, MinIO's API and console),
    below the kernel's ephemeral range: a port taken from that range was, now and then, the
    local port of one of the session's own client connections by the time Kafka bound it
    ("Address already in use"). Both are checked by binding, not by connecting."""
    low, _ = _ephemeral_range()
    while True:
        port = random.randrange(20_000, min(low, FREE_PORTS_BELOW) - 2, 2)
        if port in TEST_PORTS_AVOIDED:
            continue
        try:
            for p in (port, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999
