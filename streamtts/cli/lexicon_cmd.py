"""`streamtts lexicon put|get|delete|test TENANT …`: a tenant's pronunciation lexicon.

`put` writes a file (JSON, YAML or CSV) as the tenant's next version on `tts.lexicons`;
running workers apply it to the next request within about a second, no restart. `test`
shows what a lexicon does to some text (the phonemes the model will get) and writes the
audio, without touching Kafka when given a file.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from streamtts.errors import ConfigError

HELP = "put, get, delete or test a tenant's pronunciation lexicon"


def add_arguments(p: argparse.ArgumentParser) -> None:
    verbs = p.add_subparsers(dest="verb", metavar="VERB", parser_class=type(p), required=True)
    put = verbs.add_parser("put", help="write FILE as the tenant's next lexicon version")
    put.add_argument("tenant", metavar="TENANT")
    put.add_argument("file", metavar="FILE", type=Path, help="lexicon file: .json, .yaml/.yml or .csv")
    put.set_defaults(func=_put)
    get = verbs.add_parser("get", help="print the tenant's current lexicon")
    get.add_argument("tenant", metavar="TENANT")
    get.add_argument("--format", choices=("json", "yaml", "csv"), default="json")
    get.set_defaults(func=_get)
    delete = verbs.add_parser("delete", help="remove the tenant's lexicon (kept versions stay for replays)")
    delete.add_argument("tenant", metavar="TENANT")
    delete.set_defaults(func=_delete)
    test = verbs.add_parser("test", help="print the phonemes a lexicon gives some text and write the audio")
    test.add_argument("tenant", metavar="TENANT")
    test.add_argument(
        "file", metavar="FILE", type=Path, nargs="?", help="lexicon file (default: the tenant's current)"
    )
    test.add_argument("--text", default=None, help="text to say (default: every entry's grapheme)")
    test.add_argument("--voice", default="auto")
    test.add_argument("--lang", default=None, help="language hint: zh, en, ja, ko, yue")
    test.add_argument(
        "--out", type=Path, default=Path("lexicon-test.wav"), help="audio file (default lexicon-test.wav)"
    )
    test.set_defaults(func=_test)


def _tenant(name: str) -> str:
    import re

    from streamtts.schemas.request import TENANT_PATTERN

    if not re.match(TENANT_PATTERN, name):
        raise ConfigError(f"tenant {name!r} must be lowercase letters, digits and '-' (at most 63)")
    return name


def _entries(path: Path) -> list:
    from streamtts.features.lexicons.files import LexiconFileError, read_entries
    from streamtts.processors.segment.lexicon import LexiconError, check_lexicon
    from streamtts.schemas import ContractError, Lexicon

    try:
        entries = read_entries(path)
        check_lexicon(Lexicon.model_construct(tenant="x", version=1, entries=entries))
        Lexicon.from_obj(
            {
                "tenant": "x",
                "version": 1,
                "entries": [e.model_dump() for e in entries],
                "updated_at": "2026-01-01T00:00:00Z",
            }
        )
    except (LexiconFileError, LexiconError) as err:
        raise ConfigError(f"{path}: {err}" if not str(err).startswith(str(path)) else str(err)) from None
    except ContractError as err:
        raise ConfigError(f"{path}: {err}") from None
    return entries


def _store() -> Any:
    from streamtts.features.lexicons.store import LexiconStore
    from streamtts.runtime.settings import Settings
    from streamtts.runtime.topics import TopicNames

    settings = Settings.from_env()
    return settings, LexiconStore(settings.kafka, TopicNames(settings.kafka.topic_prefix).lexicons)


async def _kafka(coro: Any, settings: Any) -> Any:
    from aiokafka.errors import KafkaError

    from streamtts.errors import InfraError

    try:
        return await coro
    except KafkaError as err:
        raise InfraError(
            f"cannot reach Kafka at {settings.kafka.bootstrap_servers} ({type(err).__name__})"
        ) from None


def _put(args: argparse.Namespace) -> int:
    from streamtts.features.lexicons.store import LexiconTooLarge

    tenant = _tenant(args.tenant)
    entries = _entries(args.file)  # all or nothing: a bad entry stops before any write
    settings, store = _store()
    try:
        lexicon = asyncio.run(_kafka(store.put(tenant, entries), settings))
    except LexiconTooLarge as err:
        raise ConfigError(str(err)) from None
    print(f"tenant {tenant}: lexicon version {lexicon.version} written ({len(entries)} entries)")
    return 0


def _get(args: argparse.Namespace) -> int:
    tenant = _tenant(args.tenant)
    settings, store = _store()
    lexicon = asyncio.run(_kafka(store.current(tenant), settings))
    if lexicon is None:
        print(f"tenant {tenant} has no lexicon", file=sys.stderr)
        return 1
    entries = [e.model_dump(exclude_defaults=True) for e in lexicon.entries]
    if args.format == "csv":
        import csv

        from streamtts.features.lexicons.files import _CSV_FIELDS

        writer = csv.DictWriter(sys.stdout, fieldnames=list(_CSV_FIELDS), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(entries)
    elif args.format == "yaml":
        import yaml

        print(
            yaml.safe_dump(
                {"version": lexicon.version, "entries": entries}, allow_unicode=True, sort_keys=False
            ),
            end="",
        )
    else:
        import orjson

        doc = {
            "tenant": tenant,
            "version": lexicon.version,
            "updated_at": lexicon.updated_at.isoformat(),
            "entries": entries,
        }
        print(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
    return 0


def _delete(args: argparse.Namespace) -> int:
    tenant = _tenant(args.tenant)
    settings, store = _store()
    if not asyncio.run(_kafka(store.delete(tenant), settings)):
        print(f"tenant {tenant} has no lexicon: nothing deleted", file=sys.stderr)
        return 1
    print(f"tenant {tenant}: lexicon deleted")
    return 0


def _test(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from streamtts.schemas import Lexicon

    tenant = _tenant(args.tenant)
    if args.file is not None:
        lexicon = Lexicon(tenant=tenant, version=1, entries=_entries(args.file), updated_at=datetime.now(UTC))
    else:
        settings, store = _store()
        found = asyncio.run(_kafka(store.current(tenant), settings))
        if found is None:
            raise ConfigError(f"tenant {tenant} has no lexicon; give a FILE to test")
        lexicon = found
    if args.out.suffix.lower() not in (".wav", ""):
        raise ConfigError("--out must be a .wav file")
    text = args.text or "\n".join(e.grapheme + "." for e in lexicon.entries)
    if not text.strip():
        raise ConfigError("the lexicon has no entries and no --text was given")
    return _say(text, lexicon, args)


def _say(text: str, lexicon: Any, args: argparse.Namespace) -> int:
    from streamtts.audio.codecs import assemble, encode_chunk
    from streamtts.processors.direct import plan_text
    from streamtts.processors.segment.exceptions import SegmentationError
    from streamtts.processors.segment.lexicon import LexiconMatcher
    from streamtts.processors.synthesize.exceptions import SynthesisError
    from streamtts.processors.synthesize.registry import VoiceRegistry
    from streamtts.processors.synthesize.span_plan import plan_span, render_plan
    from streamtts.processors.synthesize.synthesizer import Synthesizer

    matcher = LexiconMatcher(lexicon)
    synth = Synthesizer(VoiceRegistry(threads=2))
    payloads: list[bytes] = []
    try:
        for segment in plan_text(
            synth, text, lang_hint=args.lang, voice_id=args.voice, sample_rate=24000, lexicon=matcher
        ):
            plan = plan_span(synth, segment)
            given = [f"{r.text} → /{r.ipa}/" for r in plan.runs if r.ipa]
            print(
                f"{segment.text}\n  voice {plan.voice_id}: {plan.phonemes}"
                + (f"\n  given: {', '.join(given)}" if given else "")
            )
            chunks, _ = render_plan(synth, plan)
            payloads += [encode_chunk(c.samples, c.sample_rate, "wav") for c in chunks]
    except (SegmentationError, SynthesisError) as err:
        raise ConfigError(str(err)) from None
    if not payloads:
        raise ConfigError("nothing in the text could be spoken")
    args.out.write_bytes(assemble(payloads, "wav"))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0
