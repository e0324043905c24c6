"""v1 JSON envelope vs CloudEvents binary mode, side by side on the same audio (one run).

`python -m streamtts.bench.wire_bench [--voice en_joe] [--timestamps]` renders a paragraph with
the real model, splits it into PCM chunks as the synthesize stage does (`pcm_chunks`), encodes
each one as the encode stage does (`encode_pcm_chunk`), and writes every record in both formats
(`wire.encode`), without Kafka. It prints, per topic and format:

- bytes per second of audio: the record's value plus its header names and values, what a
  producer hands Kafka before batch framing and compression;
- the per-hop decode cost: `wire.decode` of each record (what the next stage does first),
  the best of several rounds, in µs per record and per second of audio;
- the write cost: `wire.encode` of each record, likewise.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from streamtts.schemas import AudioChunk, PcmChunk, wire

TEXT = (
    "Your order has shipped and should arrive on Tuesday. The courier will call you about an hour "
    "before delivery, so please keep your phone nearby. If nobody is at home, the parcel goes to "
    "the pick-up point on Market Street, where it is kept for seven days. You can change the "
    "delivery address, choose another day, or ask us to leave the parcel with a neighbour at any "
    "time from the tracking page. Thank you for shopping with us, and have a pleasant afternoon."
)


@dataclass(frozen=True)
class Row:
    topic: str
    wire_format: wire.WireFormat
    records: int
    bytes_per_audio_s: float
    decode_us_per_record: float
    decode_us_per_audio_s: float
    encode_us_per_record: float


def _best(fn: Callable[[], object], rounds: int) -> float:
    """Best wall time of `rounds` calls, in seconds (the least disturbed by other processes)."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def compare(
    topic: str,
    contracts: Sequence[PcmChunk | AudioChunk],
    audio_s: float,
    content_type: str | None = None,
    rounds: int = 20,
) -> list[Row]:
    """One row per wire format for these records."""
    cls = type(contracts[0])
    rows = []
    for fmt in wire.WIRE_FORMATS:
        records = [wire.encode(c, fmt, content_type=content_type) for c in contracts]

        def decode_all(records: list[wire.Record] = records) -> None:
            for r in records:
                wire.decode(cls, r.value, r.headers)

        def encode_all(fmt: wire.WireFormat = fmt) -> None:
            for c in contracts:
                wire.encode(c, fmt, content_type=content_type)

        decode_s, encode_s = _best(decode_all, rounds), _best(encode_all, rounds)
        n = len(records)
        rows.append(
            Row(
                topic=topic,
                wire_format=fmt,
                records=n,
                bytes_per_audio_s=sum(r.size for r in records) / audio_s,
                decode_us_per_record=decode_s / n * 1e6,
                decode_us_per_audio_s=decode_s / audio_s * 1e6,
                encode_us_per_record=encode_s / n * 1e6,
            )
        )
    return rows


def render_chunks(voice: str, timestamps: bool, text: str = TEXT) -> list[PcmChunk]:
    """The paragraph as the synthesize stage would put it on `tts.pcm` (real model)."""
    import streamtts.processors.synthesize  # noqa: F401  (disables onnxruntime telemetry first)
    from streamtts.processors.direct import plan_text
    from streamtts.processors.synthesize.chunker import pcm_chunks
    from streamtts.processors.synthesize.registry import VoiceRegistry
    from streamtts.processors.synthesize.renderer import Budgets, SegmentRenderer
    from streamtts.processors.synthesize.synthesizer import Synthesizer

    synth = Synthesizer(VoiceRegistry(threads=2))
    segments = plan_text(synth, text, lang_hint="en", voice_id=voice, timestamps=timestamps)
    renderer = SegmentRenderer(synth, budgets=Budgets.unbounded())
    chunks: list[PcmChunk] = []
    offset = 0.0
    try:
        for segment in segments:
            parts = pcm_chunks(segment, renderer.render(segment), 5_000, offset if timestamps else None)
            offset += sum(p.duration_ms for p in parts)
            chunks += parts
    finally:
        renderer.close()
    return chunks


def measure(chunks: Sequence[PcmChunk], formats: Sequence[str] = ("mp3", "opus", "pcm")) -> list[Row]:
    from streamtts.audio import formats as registry
    from streamtts.processors.encode.stage import encode_pcm_chunk

    audio_s = sum(c.duration_ms for c in chunks) / 1000
    rows = compare("tts.pcm", chunks, audio_s)
    for fmt in formats:
        as_fmt = [
            c.model_copy(update={"request": c.request.model_copy(update={"format": fmt})}) for c in chunks
        ]
        audio = [encode_pcm_chunk(c) for c in as_fmt]
        content_type = registry.get(fmt).media_type(audio[0].sample_rate)
        rows += compare(f"tts.audio ({fmt})", audio, audio_s, content_type)
    return rows


def table(rows: Sequence[Row]) -> str:
    head = (
        "| topic | format | records | bytes / audio s | vs v1 | decode µs / record"
        " | decode µs / audio s | encode µs / record |"
    )
    out = [head, "|---|---|---:|---:|---:|---:|---:|---:|"]
    v1: dict[str, Row] = {r.topic: r for r in rows if r.wire_format == "v1"}
    for r in rows:
        base = v1[r.topic]
        out.append(
            f"| {r.topic} | {r.wire_format} | {r.records} | {r.bytes_per_audio_s:,.0f} | "
            f"{r.bytes_per_audio_s / base.bytes_per_audio_s:.2f}× | {r.decode_us_per_record:,.0f} | "
            f"{r.decode_us_per_audio_s:,.0f} | {r.encode_us_per_record:,.0f} |"
        )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streamtts.bench.wire_bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--voice", default="en_joe", help="voice to render with (default en_joe, Piper)")
    parser.add_argument(
        "--timestamps", action="store_true", help="with word timestamps (words in the chunks)"
    )
    args = parser.parse_args(argv)
    chunks = render_chunks(args.voice, args.timestamps)
    audio_s = sum(c.duration_ms for c in chunks) / 1000
    print(
        f"{args.voice}, {len(chunks)} PCM chunks, {audio_s:.1f} s of audio at {chunks[0].sample_rate} Hz"
        f"{', with word timestamps' if args.timestamps else ''}",
        file=sys.stderr,
    )
    print(table(measure(chunks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
