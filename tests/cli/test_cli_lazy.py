"""A command line imports only the subcommand it names (a worker's `run` loads no bench, eval
or gateway code); `--help` and a typo still see every subcommand."""

from __future__ import annotations

import ast
import subprocess
import sys

PROBE = """
import sys
from streamtts.cli.main import build_parser
build_parser({argv!r})
print(sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.startswith("streamtts.cli.") and m.endswith("_cmd")))
"""


def _imported(argv: list[str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return ast.literal_eval(out.stdout)


def test_a_named_subcommand_is_the_only_one_imported() -> None:
    assert _imported(["run", "--stage", "encode"]) == ["run_cmd"]
    assert _imported(["--config", "x.toml", "voices"]) == ["voices_cmd"]


def test_help_and_typos_see_every_subcommand() -> None:
    from streamtts.cli.main import SUBCOMMANDS

    assert len(SUBCOMMANDS) == 21  # a new subcommand: add it to SUBCOMMANDS, then here
    assert _imported(["--help"]) == _imported(["frobnicate"]) == sorted(SUBCOMMANDS)
