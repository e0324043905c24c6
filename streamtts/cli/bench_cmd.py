"""`streamtts bench` (being written)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (in progress)")
    p.set_defaults(func=lambda args: 0)
