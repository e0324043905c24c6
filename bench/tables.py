"""Markdown tables of report rows: one dict a row, its keys the header (in the first row's order)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def markdown_rows(rows: Sequence[Mapping[str, object]]) -> str:
    head = list(rows[0])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(row[h]) for h in head) + " |" for row in rows]
    return "\n".join(out)
