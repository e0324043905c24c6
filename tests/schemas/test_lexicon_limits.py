"""Lexicon entries: an alias says at most 10 characters per grapheme character + 40."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from streamtts.schemas import LexiconEntry
from streamtts.schemas.lexicon import max_alias_chars


def test_an_alias_is_bounded_by_its_grapheme() -> None:
    assert max_alias_chars("q") == 50 and max_alias_chars("WHO") == 70
    LexiconEntry(grapheme="WHO", alias="World Health Organization")
    LexiconEntry(grapheme="q", alias="x" * 50)
    with pytest.raises(ValidationError, match="alias has 500 characters for a grapheme of 1; at most 50"):
        LexiconEntry(grapheme="q", alias="x" * 500)


def test_phonemes_are_not_an_alias() -> None:
    LexiconEntry(grapheme="q", phonemes="kjuː")


def test_lexicon_put_refuses_an_oversized_alias_in_one_line_before_kafka(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text('entries:\n  - {grapheme: q, alias: "' + "x" * 500 + '"}\n', "utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "streamtts.cli.main", "lexicon", "put", "acme", str(bad)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "STREAMTTS_KAFKA_BOOTSTRAP": "127.0.0.1:1"},  # refused before any I/O
    )  # fmt: skip
    assert run.returncode != 0
    [line] = run.stderr.strip().splitlines()
    assert "entry 0 ('q'): alias has 500 characters for a grapheme of 1; at most 50" in line
