"""Workloads from `bench/workloads/*.jsonl`: texts (customer-service mix, long-form) and the
burst arrival profile. A mix is drawn with a seeded RNG so runs are repeatable."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from streamtts.errors import ConfigError

WORKLOAD_DIR = Path(__file__).resolve().parent / "workloads"
WORKLOADS: tuple[str, ...] = ("customer_service", "long_form", "burst")
SHORT_SHARE = 0.8
"""Customer-service traffic: 80 % short prompts (< 50 chars), 20 % long answers (> 200 chars)."""
REQUEST_LANGUAGE = {"en": "en", "zh": "zh", "mixed": "auto"}
"""Workload language tag → the request's language hint (mixed text is detected per span)."""


@dataclass(frozen=True)
class WorkItem:
    text: str
    lang: str
    """en, zh or mixed (zh + en in one text)."""
    kind: str
    """short, long or paragraph."""
    traced: bool | None = None
    """Send it in a new trace marked sampled (True) or not (False), whatever the bench's own
    ratio; None: as the producer's ratio decides (`--sections tracing` pairs the two)."""

    @property
    def request_language(self) -> str:
        return REQUEST_LANGUAGE[self.lang]

    @property
    def span_langs(self) -> frozenset[str]:
        """Languages a voice must speak to render this text without substitution."""
        return frozenset({"zh", "en"}) if self.lang == "mixed" else frozenset({self.lang})


@dataclass(frozen=True)
class BurstPhase:
    duration_s: float
    rate_factor: float
    """Multiple of the base request rate during this phase."""


def _read_jsonl(path: Path) -> list[dict[str, object]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise ConfigError(f"cannot read workload {path}: {err.strerror}") from None
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path.name} line {n}: invalid JSON ({err.msg})") from None
        if not isinstance(row, dict):
            raise ConfigError(f"{path.name} line {n}: expected a JSON object")
        rows.append(row)
    return rows


def load_texts(name: str, directory: Path = WORKLOAD_DIR) -> list[WorkItem]:
    """Texts of a workload; `burst` uses the customer-service texts (only its arrivals differ)."""
    if name not in WORKLOADS:
        raise ConfigError(f"unknown workload {name!r}; workloads are {', '.join(WORKLOADS)}")
    file = "customer_service" if name == "burst" else name
    items = []
    for row in _read_jsonl(directory / f"{file}.jsonl"):
        text, lang, kind = row.get("text"), row.get("lang"), row.get("kind")
        if not isinstance(text, str) or not text.strip() or lang not in REQUEST_LANGUAGE:
            raise ConfigError(f"{file}.jsonl: each line needs 'text' and 'lang' in en/zh/mixed")
        items.append(WorkItem(text, str(lang), str(kind or "text")))
    return items


def load_burst_profile(directory: Path = WORKLOAD_DIR) -> list[BurstPhase]:
    phases = []
    for row in _read_jsonl(directory / "burst.jsonl"):
        try:
            phases.append(BurstPhase(float(row["duration_s"]), float(row["rate_factor"])))  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError):
            raise ConfigError("burst.jsonl: each line needs numeric 'duration_s' and 'rate_factor'") from None
    if not phases or any(p.duration_s <= 0 or p.rate_factor < 0 for p in phases):
        raise ConfigError("burst.jsonl: phases need duration_s > 0 and rate_factor >= 0")
    return phases


def speakable(items: Iterable[WorkItem], languages: Iterable[str]) -> list[WorkItem]:
    """Only texts a voice can speak itself: a Piper English voice gets the English texts (zh
    spans would silently become a Kokoro fallback and measure the wrong engine)."""
    langs = frozenset(languages)
    return [i for i in items if i.span_langs <= langs]


def draw_mix(
    items: Sequence[WorkItem], n: int, rng: random.Random, short_share: float = SHORT_SHARE
) -> list[WorkItem]:
    """`n` texts with `short_share` short ones (rounded), shuffled. Workloads without
    short/long kinds (long-form) are drawn uniformly."""
    short = [i for i in items if i.kind == "short"]
    long = [i for i in items if i.kind == "long"]
    if not short or not long:
        return [rng.choice(list(items)) for _ in range(n)]
    n_short = round(n * short_share)
    picked = _cycle_draw(short, n_short, rng) + _cycle_draw(long, n - n_short, rng)
    rng.shuffle(picked)
    return picked


def _cycle_draw(pool: Sequence[WorkItem], n: int, rng: random.Random) -> list[WorkItem]:
    """Each text once before any repeats (a small sample still covers the languages)."""
    out: list[WorkItem] = []
    while len(out) < n:
        batch = list(pool)
        rng.shuffle(batch)
        out += batch[: n - len(out)]
    return out
