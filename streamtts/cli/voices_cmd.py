"""`streamtts voices`: the voices and the languages they speak, with each language's tier."""

from __future__ import annotations

import argparse
import json

HELP = "list voices and languages (tier: neural, neural-accented, formant)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from streamtts.processors.synthesize.registry import VoiceRegistry

    registry = VoiceRegistry(threads=1)  # describes without loading a model
    voices, languages = registry.describe(), registry.describe_languages()
    if args.json:
        print(json.dumps({"voices": voices, "languages": languages}, ensure_ascii=False, indent=2))
        return 0
    print("voice            engine        languages")
    for v in voices:
        langs = ", ".join(v["languages"]) if len(v["languages"]) <= 12 else f"{len(v['languages'])} languages"
        print(f"{v['voice_id']:<16} {v['engine']:<13} {langs}")
    print()
    print("language  tier             voice      error  name")
    for row in languages:
        error = "-" if row["error"] is None else f"{row['error']:.3f}"
        print(f"{row['language']:<9} {row['tier']:<16} {row['voice']:<10} {error:>5}  {row['name']}")
    neural = sum(1 for row in languages if row["tier"] != "formant")
    print(f"\n{len(languages)} languages: {neural} neural, {len(languages) - neural} formant (espeak-ng)")
    return 0
