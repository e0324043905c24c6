"""`streamtts` entry point: a thin dispatcher; each subcommand lives in its own module.

Every subcommand module `<command>_cmd` exposes `HELP` (its line in the listing), optionally
`DESCRIPTION`, and `add_arguments(parser)`, which adds its arguments and sets
`func=<callable(args) -> int>`. Errors the user can act on (`StreamTTSError`) print one line.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from streamtts.errors import StreamTTSError

# Module names under streamtts.cli (`<command>_cmd`); only the one a command line names is imported.
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
    "trace_cmd",
)


class OneLineParser(argparse.ArgumentParser):
    """argparse prints usage + error; we print one line naming the problem and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the command line, only the subcommand it names is imported (a
    worker's `streamtts run` loads no bench, eval or gateway code). Without one — `--help`,
    a typo — every subcommand is, so the listing and the error name them all."""
    parser = OneLineParser(prog="streamtts", description="Streaming TTS pipeline over Kafka")
    parser.add_argument(
        "--config", metavar="FILE", help="TOML/YAML config file (default: $STREAMTTS_CONFIG); env vars win"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser, required=True)
    named = _named_subcommand(argv)
    for name in (named,) if named else SUBCOMMANDS:
        module = importlib.import_module(f"streamtts.cli.{name}")
        # The command's name is its module's: the one home of the name `_named_subcommand` matches.
        command = sub.add_parser(
            name.removesuffix("_cmd").replace("_", "-"),
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", None),
        )
        module.add_arguments(command)
    return parser


def _named_subcommand(argv: Sequence[str] | None) -> str | None:
    """The module of the subcommand `argv` names (its first word after the global options)."""
    if argv is None:
        return None
    words = list(argv)
    while words and words[0].startswith("-"):
        option = words.pop(0)
        if option == "--config" and words:
            words.pop(0)  # its value
    module = f"{words[0].replace('-', '_')}_cmd" if words else ""
    return module if module in SUBCOMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    from streamtts.runtime import jsonlog

    # CLI commands speak in plain lines; client-library chatter would bury the one error line.
    jsonlog.configure(getattr(args, "log_level", None) or "WARNING")
    try:
        import os

        from streamtts.runtime.config_file import apply_config
        from streamtts.runtime.pipeline_settings import PipelineSettings
        from streamtts.runtime.settings import Settings

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
