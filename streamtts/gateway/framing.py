"""Fixed-size audio frames for telephony bridges, paced at real time or as fast as made.

A media-stream bridge forwards what it gets as 20 ms frames; chunks of any length would make
it re-buffer. `Framer` cuts a byte stream (PCM s16le or G.711) into frames of exactly
`frame_ms`, padding only the very last one with the format's silence; `Pacer` releases frame
k at start + k·frame_ms (an absolute schedule: no drift however long the call).
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from streamtts.audio import formats

FRAME_MS_CHOICES = (10, 20, 30, 40, 60, 80, 100)


def frameable() -> tuple[str, ...]:
    """The formats that can be cut into frames: headerless samples of a fixed width."""
    return tuple(c.name for c in formats.codecs() if c.sample_width is not None)


def frameable_choices() -> str:
    *rest, last = frameable()
    return f"{', '.join(rest)} or {last}" if rest else last


@dataclass
class Framer:
    fmt: str
    sample_rate: int
    frame_ms: int
    _buffer: bytearray = field(default_factory=bytearray)
    _width: int = field(init=False, default=0)
    _silence: bytes = field(init=False, default=b"")

    def __post_init__(self) -> None:
        codec = formats.find(self.fmt)
        if codec is None or codec.sample_width is None:
            raise ValueError(f"framing needs {frameable_choices()}, not {self.fmt}")
        self._width, self._silence = codec.sample_width, codec.silence
        if self.frame_ms not in FRAME_MS_CHOICES:
            raise ValueError(f"frame_ms must be one of {FRAME_MS_CHOICES}")

    @property
    def frame_bytes(self) -> int:
        return self.sample_rate * self.frame_ms // 1000 * self._width

    def push(self, data: bytes) -> list[bytes]:
        """Whole frames available after `data`."""
        self._buffer += data
        n = self.frame_bytes
        count = len(self._buffer) // n
        frames = [bytes(self._buffer[i * n : (i + 1) * n]) for i in range(count)]
        del self._buffer[: count * n]
        return frames

    def flush(self) -> list[bytes]:
        """The rest as one last frame, padded with silence (nothing if no rest)."""
        if not self._buffer:
            return []
        silence = self._silence
        missing = self.frame_bytes - len(self._buffer)
        frame = bytes(self._buffer) + silence * (missing // len(silence))
        self._buffer.clear()
        return [frame]


class Pacer:
    """Real time: frame k leaves at start + k·frame_ms; `fast`: at once.

    A short lag (a slow send) is made up; a stall longer than `catch_up_ms` (the audio came
    late) is not: the schedule restarts at the late frame. A bridge plays silence during a
    stall; a burst after it would sit in its buffer as extra delay, audio the caller still
    hears after a barge-in."""

    def __init__(
        self,
        frame_ms: int,
        realtime: bool,
        *,
        catch_up_ms: float = 100.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.frame_s = frame_ms / 1000
        self.catch_up_s = catch_up_ms / 1000
        self.realtime = realtime
        self._clock = clock
        self._sleep = sleep
        self._start: float | None = None
        self._sent = 0

    async def wait_turn(self) -> None:
        if not self.realtime:
            return
        now = self._clock()
        if self._start is None:
            self._start = now
        due = self._start + self._sent * self.frame_s
        if now - due > self.catch_up_s:  # a stall: start the schedule again here
            self._start, due = now - self._sent * self.frame_s, now
        self._sent += 1
        if due > now:
            await self._sleep(due - now)


def media_event(frame: bytes, sequence: int, timestamp_ms: int, stream_id: str) -> dict[str, object]:
    """The JSON shape telephony media-stream WebSockets use for an outbound frame."""
    return {
        "event": "media",
        "sequenceNumber": str(sequence),
        "streamSid": stream_id,
        "media": {
            "track": "outbound",
            "chunk": str(sequence),
            "timestamp": str(timestamp_ms),
            "payload": base64.b64encode(frame).decode(),
        },
    }
