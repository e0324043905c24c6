"""Text as an LLM streams it, for the benchmarks that write replies token by token
(`bench --llm-stream`, `eval --streamed`)."""

from __future__ import annotations

import re

_DENSE = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"  # kana, Han, Hangul
_TOKEN = re.compile(rf"\s*(?:[{_DENSE}]{{1,2}}|[^\s{_DENSE}]+)|\s+")


def stream_tokens(text: str) -> list[str]:
    """`text` roughly as an LLM streams it: a Latin word (with its punctuation) carrying the
    space before it; kana, Han and Hangul two characters a token. Joined, the tokens are
    `text` exactly."""
    return _TOKEN.findall(text)
