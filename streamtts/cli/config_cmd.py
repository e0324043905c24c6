"""`streamtts config show`: the effective configuration, secrets masked."""

from __future__ import annotations

import argparse

HELP = "show the effective configuration (secrets masked)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser(
        "show", help="print the configuration as TOML (loadable with --config; secrets masked)"
    ).set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    from streamtts.runtime.config_file import effective_config, render_toml

    print(render_toml(effective_config()), end="")
    return 0
