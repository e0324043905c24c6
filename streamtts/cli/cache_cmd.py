"""`streamtts cache warm`: render a tenant's prompt list into the shared render cache."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from streamtts.errors import ConfigError

HELP = "render cache tools (warm: pre-render prompts into the shared tier)"
DESCRIPTION = (
    "The render cache keeps synthesized spans (memory per worker, shared in object storage "
    "under render-cache/). `warm` renders every line of a file the way the pipeline would "
    "segment it, so those prompts are served without inference from their first request."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", required=True)
    warm = actions.add_parser("warm", help="render each line of a file into the shared tier")
    warm.add_argument("--file", type=Path, required=True, help="UTF-8 text, one prompt per line")
    warm.add_argument("--voice", default="auto", help="voice id, blend or auto (default)")
    warm.add_argument("--lang", default=None, help="language hint (zh, en, ja, ko, yue)")
    warm.add_argument("--speed", type=float, default=None, help="speaking rate the requests will use")
    warm.add_argument("--threads", type=int, default=2, help="inference threads (default 2)")
    warm.set_defaults(func=_warm)


def _warm(args: argparse.Namespace) -> int:
    from streamtts.processors.direct import warm_cache
    from streamtts.processors.segment.exceptions import SegmentationError
    from streamtts.processors.segment.span_limits import SpanLimits
    from streamtts.processors.synthesize.registry import VoiceRegistry
    from streamtts.processors.synthesize.speech_stack import build_cache
    from streamtts.processors.synthesize.synthesizer import Synthesizer
    from streamtts.runtime.pipeline_settings import PipelineSettings
    from streamtts.runtime.settings import Settings

    try:
        prompts = [line.strip() for line in args.file.read_text("utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read {args.file}: {getattr(err, 'strerror', None) or err}") from err
    if not prompts:
        raise ConfigError(f"{args.file} has no prompts")
    if args.threads < 1:
        raise ConfigError("--threads must be ≥ 1")
    settings = Settings.from_env()
    pipeline = PipelineSettings.from_env()
    cache = build_cache(pipeline, settings.s3)
    if cache is None or cache.shared is None:
        raise ConfigError("the render cache or its shared tier is off (STREAMTTS_RENDER_CACHE / _SHARED)")
    synth = Synthesizer(VoiceRegistry(threads=args.threads), cache=cache)
    started = time.perf_counter()
    rendered = already = 0
    for n, prompt in enumerate(prompts, 1):
        try:
            new, old = warm_cache(
                synth,
                prompt,
                voice_id=args.voice,
                lang_hint=args.lang,
                speed=args.speed,
                markup=pipeline.text.markup,
                limits=SpanLimits.of(pipeline.text),  # planned as the segment stage plans
            )
        except SegmentationError as err:
            print(f"[cache] line {n}: skipped ({err})", file=sys.stderr)
            continue
        rendered, already = rendered + new, already + old
        print(
            f"[cache] {n}/{len(prompts)} prompts: {rendered} spans rendered, {already} already cached",
            file=sys.stderr,
        )
    cache.flush()
    if cache.stats["bytes"]["shared"] == 0 and rendered:
        raise ConfigError(f"nothing reached the shared tier at {settings.s3.endpoint}: is object storage up?")
    print(
        f"warmed {len(prompts)} prompts: {rendered} spans rendered, {already} already cached, "
        f"{cache.stats['bytes']['shared'] / 1e6:.1f} MB stored in {time.perf_counter() - started:.1f} s"
    )
    return 0
