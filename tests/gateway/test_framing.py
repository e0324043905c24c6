"""Telephony framing, pure parts: exact frame sizes, silence padding, an absolute pace."""

from __future__ import annotations

import asyncio
import base64
import time

import pytest

from streamtts.gateway.framing import Framer, Pacer, media_event


def test_frames_are_exactly_frame_ms_and_only_the_last_is_padded() -> None:
    framer = Framer("mulaw", 8000, 20)
    assert framer.frame_bytes == 160
    assert framer.push(b"\x01" * 100) == []
    frames = framer.push(b"\x02" * 300)  # 400 bytes so far: two frames, 80 left
    assert [len(f) for f in frames] == [160, 160]
    [last] = framer.flush()
    assert len(last) == 160 and last[:80] == b"\x02" * 80 and last[80:] == b"\xff" * 80  # μ-law silence
    assert framer.flush() == []
    pcm = Framer("pcm", 24000, 20)
    assert pcm.frame_bytes == 960
    assert Framer("alaw", 8000, 40).push(b"\x00" * 320)[0] == b"\x00" * 320
    with pytest.raises(ValueError):
        Framer("mp3", 24000, 20)
    with pytest.raises(ValueError):
        Framer("pcm", 24000, 25)


def test_media_events_carry_the_frame_in_base64() -> None:
    event = media_event(b"\xff" * 160, 3, 40, "session")
    assert event["event"] == "media" and event["sequenceNumber"] == "3"
    assert base64.b64decode(event["media"]["payload"]) == b"\xff" * 160  # type: ignore[index]


async def test_realtime_pacing_follows_an_absolute_schedule() -> None:
    pacer = Pacer(20, realtime=True)
    started = time.monotonic()
    for _ in range(10):
        await pacer.wait_turn()
    elapsed = time.monotonic() - started
    assert 0.17 <= elapsed < 0.5  # frame k leaves at k·20 ms (the first at once)
    fast = Pacer(20, realtime=False)
    started = time.monotonic()
    for _ in range(100):
        await fast.wait_turn()
    assert time.monotonic() - started < 0.05
    await asyncio.sleep(0)
