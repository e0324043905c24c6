"""Text as an LLM streams it, for the benchmarks that write replies token by token
(`bench --llm-stream`, `eval --streamed`): its tokens, and their pace."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Sequence

_DENSE = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"  # kana, Han, Hangul
_TOKEN = re.compile(rf"\s*(?:[{_DENSE}]{{1,2}}|[^\s{_DENSE}]+)|\s+")


def stream_tokens(text: str) -> list[str]:
    """`text` roughly as an LLM streams it: a Latin word (with its punctuation) carrying the
    space before it; kana, Han and Hangul two characters a token. Joined, the tokens are
    `text` exactly."""
    return _TOKEN.findall(text)


async def write_paced(
    tokens: Sequence[str], per_s: float, send: Callable[[str], Awaitable[object]]
) -> list[float]:
    """`send` each token at `per_s` tokens a second, on a schedule fixed from the first (a slow
    send does not slow the pace); returns when each was sent (`time.monotonic`)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    sent: list[float] = []
    for k, token in enumerate(tokens):
        await asyncio.sleep(max(0.0, start + k / per_s - loop.time()))  # the LLM's pace
        await send(token)
        sent.append(time.monotonic())
    return sent
