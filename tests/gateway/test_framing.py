"""Telephony framing, pure parts: exact frame sizes, silence padding, an absolute pace."""

from __future__ import annotations

import base64

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
    """Frame k is due at start + k·20 ms: a slow send does not push later frames back."""
    now = [100.0]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(round(seconds, 6))
        now[0] += seconds

    pacer = Pacer(20, realtime=True, clock=lambda: now[0], sleep=sleep)
    await pacer.wait_turn()  # frame 0: at once
    await pacer.wait_turn()  # frame 1: 20 ms later
    now[0] += 0.050  # the sender was slow for 50 ms: frames 2 and 3 are already due
    await pacer.wait_turn()
    await pacer.wait_turn()
    await pacer.wait_turn()  # frame 4: due at start + 80 ms
    assert waits == [0.02, 0.01]
    now[0] += 1.0  # the audio stalled for a second: no burst of 50 frames after it
    await pacer.wait_turn()  # this one at once; the schedule starts again from it
    await pacer.wait_turn()
    assert waits == [0.02, 0.01, pytest.approx(0.02)]
    fast = Pacer(20, realtime=False, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        await fast.wait_turn()
    assert waits == [0.02, 0.01, pytest.approx(0.02)]
