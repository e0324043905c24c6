"""The livekit-agents plugin, driven through livekit's own TTS interface (`tts.stream()`,
`push_text`, `end_input`, the `SynthesizedAudio` it yields) against a live gateway and the
real pipeline: tokens spoken as they are pushed, aligned transcripts, and an interruption
that cancels the request upstream."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT

from streamtts.integrations.livekit import TTS
from tests.gateway.conftest import ACME

pytestmark = [pytest.mark.integration, pytest.mark.model]

REPLY = (
    "Thanks for calling, I can see your order right here. It shipped on Monday, "
    "and it should arrive by Thursday at the latest."
)


def tokens(text: str) -> list[str]:
    return re.findall(r"\s*\S+", text)


FIRST_SENTENCE = len(tokens(REPLY.split(". ")[0]))


async def test_livekit_stream_speaks_tokens_as_they_are_pushed(live_gateway_url: str) -> None:
    tts = TTS(base_url=live_gateway_url, api_key="key-acme", voice="en_joe", language="en")
    stream = tts.stream()
    events = []
    pushed = 0
    heard_after: int | None = None

    async def consume() -> None:
        nonlocal heard_after
        async for ev in stream:
            events.append(ev)
            if heard_after is None:
                heard_after = pushed

    consumer = asyncio.create_task(consume())
    words = tokens(REPLY)
    for token in words:
        stream.push_text(token)
        pushed += 1
        # An LLM's pace: the first sentence slowly (4 words/s: a stalled machine cannot decide this
        # by timing), the rest at 12 words/s.
        await asyncio.sleep(0.25 if pushed < FIRST_SENTENCE else 0.08)
    stream.end_input()
    async with asyncio.timeout(60):
        await consumer
    await stream.aclose()
    await tts.aclose()

    first_sentence = FIRST_SENTENCE
    print(
        f"livekit: first audio after token {heard_after} of {len(words)} (first sentence: {first_sentence})"
    )
    assert heard_after is not None and heard_after < first_sentence, "heard only after its first sentence"
    assert all(ev.frame.sample_rate == 24000 and ev.frame.num_channels == 1 for ev in events)
    seconds = sum(ev.frame.samples_per_channel for ev in events) / 24000
    assert seconds > 5.0, seconds
    timed = [t for ev in events for t in ev.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT, [])]
    assert "".join(timed).split() == REPLY.split()  # the words as written, aligned
    starts = [t.start_time for t in timed]
    assert starts == sorted(starts) and starts[-1] < seconds


async def test_livekit_interruption_cancels_the_reply_upstream(live_gateway_url: str) -> None:
    tts = TTS(base_url=live_gateway_url, api_key="key-acme", voice="en_joe", language="en")
    stream = tts.stream()
    for token in tokens(REPLY):
        stream.push_text(token)
    async with asyncio.timeout(60):
        first = await anext(aiter(stream))  # audio is playing: the user speaks
    assert first.frame.samples_per_channel > 0
    rid = stream.gateway_request_id  # type: ignore[attr-defined]  # the plugin's own stream
    await stream.aclose()  # what livekit does on an interruption
    await tts.aclose()
    assert rid is not None
    async with httpx.AsyncClient(base_url=live_gateway_url, headers=ACME, timeout=60) as client:
        status = (await client.get(f"/v1/speech/{rid}", params={"wait": 30})).json()
    assert status["status"] == "cancelled", status
