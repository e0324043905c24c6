"""`streamtts` entry point: a thin dispatcher; each subcommand lives in its own module.

Every subcommand module exposes `register(subparsers)` which adds its parser and sets
`func=<callable(args) -> int>`. Errors the user can act on (`StreamTTSError`) print one line.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from streamtts.errors import StreamTTSError

# Module names under streamtts.cli; imported lazily so `streamtts infra` does not load the model.
SUBCOMMANDS: tuple[str, ...] = (
    "infra_cmd",
    "topics_cmd",
    "submit_cmd",
    "cancel_cmd",
    "lexicon_cmd",
    "synth_cmd",
    "voices_cmd",
    "run_cmd",
    "listen_cmd",
    "replay_cmd",
    "demo_cmd",
    "bench_cmd",
    "chaos_cmd",
    "eval_cmd",
    "cache_cmd",
    "config_cmd",
    "gateway_cmd",
    "audit_cmd",
    "storage_cmd",
    "release_cmd",
)


class OneLineParser(argparse.ArgumentParser):
    """argparse prints usage + error; we print one line naming the problem and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="streamtts", description="Streaming TTS pipeline over Kafka")
    parser.add_argument(
        "--config", metavar="FILE", help="TOML/YAML config file (default: $STREAMTTS_CONFIG); env vars win"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    sub.required = True
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"streamtts.cli.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from streamtts.runtime import jsonlog

    # CLI commands speak in plain lines; client-library chatter would bury the one error line.
    jsonlog.configure(getattr(args, "log_level", None) or "WARNING")
    try:
        import os

        from streamtts.runtime.config_file import apply_config
        from streamtts.runtime.settings import PipelineSettings, Settings

        apply_config(args.config or os.environ.get("STREAMTTS_CONFIG"))
        Settings.from_env()  # invalid configuration fails here, before any work, naming the key
        PipelineSettings.from_env()
        return int(args.func(args) or 0)
    except StreamTTSError as err:
        print(f"streamtts: error: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `streamtts … | head`: the reader left; not an error of ours
        return 0
    except KeyboardInterrupt:
        print("streamtts: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
