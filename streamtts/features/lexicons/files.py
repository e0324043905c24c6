"""Lexicon files (JSON, YAML, CSV) → validated entries; the first bad entry is named and
nothing is returned, so a lexicon is never applied in part."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import orjson
import yaml
from pydantic import ValidationError

from streamtts.schemas.lexicon import MAX_ENTRIES, LexiconEntry

_CSV_FIELDS = ("grapheme", "alias", "phonemes", "alphabet", "language", "case_sensitive", "whole_word")


class LexiconFileError(ValueError):
    """A lexicon file that cannot be used; one line saying where and why."""


def read_entries(path: Path) -> list[LexiconEntry]:
    """The entries of a lexicon file: `{"entries": [...]}` as JSON or YAML, or CSV with a
    header row naming the entry fields.

    Raises:
        LexiconFileError: unreadable, not the format its suffix says, or an invalid entry.
    """
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise LexiconFileError(f"cannot read {path}: {err.strerror or err}") from None
    suffix = path.suffix.lower()
    if suffix == ".csv":
        items = _csv(raw, path)
    else:
        doc = _yaml(raw, path) if suffix in (".yaml", ".yml") else _json(raw, path)
        if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
            raise LexiconFileError(f'{path}: expected {{"entries": [...]}}')
        items = doc["entries"]
    if len(items) > MAX_ENTRIES:
        raise LexiconFileError(f"{path}: {len(items)} entries; the limit is {MAX_ENTRIES}")
    return [_entry(i, item) for i, item in enumerate(items)]


def _entry(i: int, item: Any) -> LexiconEntry:
    if not isinstance(item, dict):
        raise LexiconFileError(f"entry {i}: expected an object with grapheme and alias or phonemes")
    name = str(item.get("grapheme", ""))[:40]
    try:
        return LexiconEntry.model_validate(item)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        detail = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        raise LexiconFileError(f"entry {i} ({name!r}): {where + ': ' if where else ''}{detail}") from None


def _json(raw: bytes, path: Path) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise LexiconFileError(f"{path}: not JSON ({err})") from None


def _yaml(raw: bytes, path: Path) -> Any:
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as err:
        raise LexiconFileError(f"{path}: not YAML ({str(err).splitlines()[0]})") from None


def _csv(raw: bytes, path: Path) -> list[dict[str, Any]]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LexiconFileError(f"{path}: not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text))
    unknown = set(reader.fieldnames or ()) - set(_CSV_FIELDS)
    if not reader.fieldnames or "grapheme" not in reader.fieldnames or unknown:
        raise LexiconFileError(f"{path}: the header must name columns among {', '.join(_CSV_FIELDS)}")
    rows: list[dict[str, Any]] = []
    for row in reader:
        item: dict[str, Any] = {k: v for k, v in row.items() if k and v not in (None, "")}
        for flag in ("case_sensitive", "whole_word"):
            if flag in item:
                item[flag] = str(item[flag]).strip().lower() in ("1", "true", "yes")
        rows.append(item)
    return rows
