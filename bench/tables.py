"""Markdown tables: of report rows (one dict a row, its keys the header in the first row's
order) or of a header and rows of cells, and the cells' number formats."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def markdown_rows(rows: Sequence[Mapping[str, object]]) -> str:
    head = list(rows[0])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(row[h]) for h in head) + " |" for row in rows]
    return "\n".join(out)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The first column left-aligned (names), the others right-aligned (numbers)."""
    align = ["---" if i == 0 else "--:" for i in range(len(header))]
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(align) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def ms_cell(s: float | None) -> str:
    """Seconds as whole milliseconds; "-" for none measured."""
    return "-" if s is None or math.isnan(s) else f"{s * 1000:.0f}"


def s_cell(s: float | None) -> str:
    return "-" if s is None or math.isnan(s) else f"{s:.2f}"
