"""`streamtts config show`: the effective configuration, secrets masked."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show the effective configuration (secrets masked)")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    actions.add_parser("show", help="print the configuration as TOML-like sections").set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    from streamtts.config_file import effective_config

    cfg = effective_config()
    for section, values in cfg.items():
        if not isinstance(values, dict):
            print(f"{section} = {values!r}")
            continue
        print(f"[{section}]")
        for key, value in values.items():
            shown = list(value) if isinstance(value, tuple) else value
            print(f"{key} = {shown!r}")
        print()
    return 0
