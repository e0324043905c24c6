"""Continuous encoders of the requests in flight at one encode worker (one per request).

A request's chunks reach the encode stage in order (one key, one partition, one worker; the
stage encodes a request's chunks one after another). Where the format has a continuous
encoder (mp3), the stage feeds it chunk after chunk, so the chunks join into one gapless
stream instead of carrying the encoder's delay and padding at every boundary.

What the memory costs and how it fails, by design:
- a request of one chunk is encoded alone (stateless, and its encoding can be reused from the
  render cache); only a multi-chunk request opens a stream;
- the stream of a request ends with its last chunk (or its cancel marker) and is dropped; a
  chunk still in flight after its request's cancel is encoded alone (nobody hears it);
- a stream not fed for `idle_s` is dropped (its request's audio stopped coming: the sink
  fails such a request after the same time), and at most `max_open` are kept (least recently
  fed dropped first; ~0.6 MB each), so a request whose last chunk never comes costs little;
- a chunk that is not the next one its request's stream expects (no stream: the worker
  restarted, the partition moved, the stream was dropped; or a chunk read again) opens a new
  stream. That boundary then has the encoder's delay again, and the samples the old stream
  held back (< 2 frames, ~50 ms) are not in the stream: the price of a failover mid-request.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from streamtts.audio.codecs import open_stream
from streamtts.audio.formats import StreamEncoder
from streamtts.schemas import PcmChunk

StreamUse = Literal["alone", "opened", "continued", "reopened"]
"""How a chunk was encoded: alone (no stream), first of a stream, next in its stream, or the
first of a new stream opened mid-request (the old one lost: a restart or a re-read)."""


@dataclass
class _Open:
    encoder: StreamEncoder
    expects: tuple[int, int]
    """The (seq, part) of the chunk that continues the stream."""
    fed_at: float


@dataclass(frozen=True)
class StreamStep:
    """The encoder for one chunk, and whether the stream ends with it."""

    encoder: StreamEncoder
    use: StreamUse
    final: bool


class OpenStreams:
    """The streams of one encode worker, by request. Used from the event loop only (a
    request's `StreamStep` is then fed on a pool thread, one chunk at a time)."""

    def __init__(
        self, max_open: int = 128, idle_s: float = 300.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_open = max_open
        self.idle_s = idle_s
        self._clock = clock
        self._open: OrderedDict[tuple[str, str], _Open] = OrderedDict()
        """Least recently fed first."""
        self._cancelled: OrderedDict[tuple[str, str], None] = OrderedDict()
        """Requests whose cancel marker came (the last `max_open` × 8)."""

    def __len__(self) -> int:
        return len(self._open)

    def drop(self, chunk: PcmChunk) -> None:
        """Forget the stream of `chunk`'s request (its chunk could not be encoded)."""
        self._open.pop((chunk.request.tenant, chunk.request_id), None)

    def step(self, chunk: PcmChunk) -> StreamStep | None:
        """The stream `chunk` is encoded by, or None to encode it alone.

        Raises:
            EncodeError: the format's encoder failed to open.
        """
        now = self._clock()
        while self._open and now - next(iter(self._open.values())).fed_at > self.idle_s:
            self._open.popitem(last=False)
        key = (chunk.request.tenant, chunk.request_id)
        position = (chunk.seq, chunk.part)
        final = chunk.last and chunk.last_part
        if chunk.cancelled:
            self._open.pop(key, None)  # a cancel ends the stream
            self._cancelled[key] = None
            while len(self._cancelled) > 8 * self.max_open:
                self._cancelled.popitem(last=False)
            return None
        if (position == (0, 0) and final) or key in self._cancelled:
            return None  # a one-chunk request has no stream, nor a chunk after its cancel
        held = self._open.pop(key, None)
        if held is not None and held.expects == position and position != (0, 0):
            use: StreamUse = "continued"
            encoder = held.encoder
        else:
            opened = open_stream(chunk.request.format, chunk.sample_rate)
            if opened is None:
                return None  # the format (or this rate) has no continuous encoder
            encoder = opened
            use = "opened" if position == (0, 0) else "reopened"
        if not final:
            following = (chunk.seq + 1, 0) if chunk.last_part else (chunk.seq, chunk.part + 1)
            self._open[key] = _Open(encoder, following, now)
            while len(self._open) > self.max_open:
                self._open.popitem(last=False)
        return StreamStep(encoder, use, final)
