"""Where the words of a run of Han characters end (jieba), so a span is never cut inside one.

A first span over its budget is cut inside its sentence. Cut at an arbitrary character, the
cut fell inside words: "请联系bil|ling部门" was read as three unrelated Chinese syllables
("bˈɪl" and "ˈɪŋ" spoken apart), "找|到Settings" broke the verb before the English word
(issue #45). The splitter cuts only where a word ends; this module says where that is in
Chinese text, as the Chinese G2P (`processors.synthesize.g2p.ChineseG2P`) cuts it.
"""

from __future__ import annotations

import logging
import re
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_HAN = "\u3400-\u9fff\uf900-\ufaff"
_HAN_RUN = re.compile(f"[{_HAN}]+")
_ONE_HAN = re.compile(f"[{_HAN}]")


def is_han(ch: str) -> bool:
    """A Han character (the runs jieba reads)."""
    return _ONE_HAN.match(ch) is not None


# Words that open a clause in a sentence written without commas: a cut before one of them
# is where a speaker would pause ("…遇到任何问题 | 请联系billing部门…").
CLAUSE_OPENERS = frozenset(
    "然后 并且 并 而且 但是 但 可是 不过 所以 因此 因为 由于 如果 假如 或者 还是 请 再 以便 以及 "
    "同时 否则 于是 然而 就是 只要 只是 并请 然后再".split()
)

# Particles bound to the word before them: a span never starts with one ("…由我们 | 的finance…").
BOUND_PARTICLES = frozenset("的 了 吗 呢 吧 啊 呀 着 过 地 得 么 们 之".split())


@dataclass(frozen=True)
class HanBreaks:
    """Where a text's Han runs may be cut: at `ends` (offsets where a jieba word ends);
    `openers` ⊆ `ends` are those before a clause-opening word (the better cuts)."""

    ends: frozenset[int]
    openers: frozenset[int]


@lru_cache(maxsize=1)
def _tokenizer() -> Any:
    """jieba's tokenizer, loaded once per process (~1 s; its prefix-dict cache goes to the
    temp dir, as the Chinese G2P's does). Read-only once loaded: `lcut` is safe from the
    segment stage's worker threads."""
    import jieba

    logging.getLogger("jieba").setLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    tokenizer.tmp_dir = tempfile.gettempdir()
    tokenizer.initialize()
    return tokenizer


def warm_han_words() -> None:
    """Load jieba's dictionary now, before the first record (off the event loop)."""
    _tokenizer()


def han_breaks(text: str) -> HanBreaks:
    """The word ends of `text`'s Han runs (each run's own end included), and which of them
    open a clause. Linear in `len(text)`: jieba's DAG looks at most its longest dictionary
    word ahead of each character."""
    ends: set[int] = set()
    openers: set[int] = set()
    for run in _HAN_RUN.finditer(text):
        at = run.start()
        for word in _tokenizer().lcut(run.group(), cut_all=False):
            if word in CLAUSE_OPENERS:
                openers.add(at)
            elif word in BOUND_PARTICLES:
                ends.discard(at)
            at += len(word)
            ends.add(at)
    return HanBreaks(frozenset(ends), frozenset(openers))
