"""`streamtts synth`: synthesize text to an audio file locally (no Kafka): the pipeline's own
stages run in memory, and the file is the one the sink would store.

Module-level imports stay light: the model stack is imported inside `run`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from streamtts.audio import formats
from streamtts.errors import ConfigError
from streamtts.schemas.names import WAV_CODECS

HELP = "synthesize text to an audio file (local, no Kafka)"
DESCRIPTION = "Synthesize text with the local speech core and write one audio file."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--text", default=None, help="text to speak; '-' or omitted reads stdin")
    parser.add_argument(
        "--voice",
        default="auto",
        help="voice id or blend (e.g. jm_kumo, en_joe, 'jm_kumo:0.7+jf_alpha:0.3'), or auto"
        " (the default, as in requests: one voice for the whole text where one speaks all its"
        " languages)",
    )
    parser.add_argument(
        "--lang",
        default=None,
        help="language (a tag of `streamtts voices`: zh, en, ja, es, fr, pl, ...; default: identified"
        " per sentence)",
    )
    parser.add_argument(
        "--format",
        default=None,
        choices=formats.names(),
        help="output format (default: from --out's extension, else wav)",
    )
    parser.add_argument(
        "--codec",
        default="pcm_s16le",
        choices=WAV_CODECS,
        help="for wav: 16-bit PCM (default) or G.711 mu-law / A-law inside the WAV (8 kHz)",
    )
    parser.add_argument(
        "--sample-rate",
        type=int,
        default=None,
        help="output sample rate in Hz (default: the voice's native rate)",
    )
    parser.add_argument("--speed", type=float, default=None, help="speaking rate, 0.5-2.0")
    parser.add_argument("--threads", type=int, default=2, help="inference threads (default 2)")
    parser.add_argument(
        "--voices-dir",
        type=Path,
        default=None,
        help="directory with extra voices (.onnx+.onnx.json, .npy, .npz)",
    )
    parser.add_argument("--out", required=True, type=Path, help="output file")
    parser.add_argument(
        "--captions",
        type=Path,
        default=None,
        help="also write word-timed captions: .vtt (WebVTT), .srt or .json (the word list)",
    )
    parser.set_defaults(func=run)


def _read_text(arg: str | None) -> str:
    if arg in (None, "-") and sys.stdin.isatty():
        raise ConfigError("give --text TEXT or pipe the text on stdin")
    text = sys.stdin.read() if arg in (None, "-") else str(arg)
    if not text.strip():
        raise ConfigError("--text is empty (nothing to synthesize)")
    return text


def _pick_format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    codec = formats.for_suffix(args.out.suffix) if args.out.suffix else None
    return codec.name if codec is not None else "wav"


def _caption_format(path: Path) -> str:
    """vtt, srt or json from the captions file's extension."""
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("vtt", "srt", "json"):
        raise ConfigError(f"--captions must end in .vtt, .srt or .json, not {path.name!r}")
    if path.parent and not path.parent.exists():
        raise ConfigError(f"captions directory {path.parent} does not exist")
    return fmt


def run(args: argparse.Namespace) -> int:
    """Synthesize `args.text` into `args.out`; print a timing summary to stderr."""
    fmt = _pick_format(args)
    if args.codec != "pcm_s16le" and fmt != "wav":
        raise ConfigError(f"--codec {args.codec} is for wav files; {fmt} has its own")
    sample_rate = args.sample_rate
    if sample_rate is None:
        sample_rate = formats.default_rate(fmt, args.codec)  # G.711: 8 kHz telephony speech
    text = _read_text(args.text)
    if args.threads < 1:
        raise ConfigError(f"--threads must be >= 1, got {args.threads}")
    if args.out.parent and not args.out.parent.exists():
        raise ConfigError(f"output directory {args.out.parent} does not exist")
    caption_format = _caption_format(args.captions) if args.captions is not None else None

    import asyncio

    from streamtts.audio.exceptions import EncodingError
    from streamtts.errors import RecordError
    from streamtts.processors.in_memory import InMemoryTopology, StoredRender
    from streamtts.processors.segment.exceptions import SegmentationError
    from streamtts.processors.segment.langid import normalize_lang_hint
    from streamtts.processors.synthesize.registry import VoiceRegistry
    from streamtts.processors.synthesize.renderer import Budgets, SegmentRenderer
    from streamtts.processors.synthesize.synthesizer import Synthesizer
    from streamtts.runtime.loop_record import LoopRecord
    from streamtts.schemas import ContractError, TTSRequest
    from streamtts.sinks.memory_store import MemoryObjectStore

    started = time.perf_counter()
    first_chunk_s: float | None = None
    try:
        # The request a producer would send; its captions need the words' timestamps.
        request = TTSRequest.new(
            text,
            language=normalize_lang_hint(args.lang) or "auto",
            voice=args.voice,
            speed=1.0 if args.speed is None else args.speed,
            sample_rate=sample_rate,
            format=fmt,
            codec=args.codec,
            timestamps=caption_format is not None,
            cache=False,
        )
    except (ContractError, SegmentationError) as err:
        raise ConfigError(str(err)) from err
    try:
        registry = VoiceRegistry(threads=args.threads, user_voice_dir=args.voices_dir)
        if args.voice != "auto":
            registry.spec(args.voice)  # an unknown voice fails before the model loads
    except (KeyError, ValueError, RecordError) as err:  # a bad voice pack too
        raise ConfigError(str(err).strip("'\"")) from err
    # No time budgets: nobody else waits on this process (the pipeline's would degrade a span).
    renderer = SegmentRenderer(Synthesizer(registry), budgets=Budgets.unbounded())

    def heard(record: LoopRecord) -> None:
        nonlocal first_chunk_s
        if first_chunk_s is None and record.topic == topology.topics.pcm:
            first_chunk_s = time.perf_counter() - started

    # The pipeline's own stages, in memory (`processors.in_memory`): segment, synthesize,
    # encode and the sink, which stores the file (and captions) in a store in memory.
    topology = InMemoryTopology(renderer, on_record=heard, object_store=MemoryObjectStore())

    async def speak() -> StoredRender:
        async with topology:
            if request.language == "auto":
                await topology.warm()  # detection's models, before the plan's budget starts
            return await topology.render_stored(request)

    try:
        # A loop of its own, left as the caller's was: `asyncio.run` unsets the thread's
        # current loop on exit, and an in-process caller's (a test session's) loop went with it.
        loop = asyncio.new_event_loop()
        try:
            stored = loop.run_until_complete(speak())
        finally:
            loop.close()
    except (RecordError, EncodingError) as err:
        raise ConfigError(str(err)) from err
    finally:
        renderer.close()
    result, data = stored.result, stored.audio
    args.out.write_bytes(data)
    audio_s = result.duration_ms / 1000
    rate = result.sample_rate
    substitutions = {d.voice_used for d in result.degraded if d.voice_used and d.voice_used != args.voice}
    if args.captions is not None and caption_format is not None:
        captions = result.captions
        if captions is None:
            raise ConfigError("the request's captions were not stored")
        ref = {"vtt": captions.vtt, "srt": captions.srt, "json": captions.words}[caption_format]
        args.captions.write_bytes(stored.files[ref.key])
        words = len(result.words or [])
        print(f"wrote {args.captions} ({caption_format}, {words} words)", file=sys.stderr)

    total_s = time.perf_counter() - started
    rtf = total_s / audio_s if audio_s else float("nan")
    note = f"; fallback voices used: {', '.join(sorted(substitutions))}" if substitutions else ""
    print(
        f"wrote {args.out} ({fmt}, {rate} Hz, {len(data)} bytes): audio {audio_s:.2f} s, "
        f"first chunk {first_chunk_s or 0.0:.2f} s, total {total_s:.2f} s, RTF {rtf:.2f} "
        f"(incl. model load){note}",
        file=sys.stderr,
    )
    return 0
