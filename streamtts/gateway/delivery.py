"""What the gateway has written of a request's audio to one client, and the switch that stops it.

Barge-in is judged by what the caller hears: after a cancel nothing more may reach them, and
"what was spoken" is what was written to their socket, not what the pipeline made. Every live
stream of a request's audio (a WebSocket session's sentence, an HTTP audio stream) holds one
`Delivery`; the writer adds each frame as it writes it, and a cancel from any source (DELETE,
WS `cancel`, a record on `tts.control`) stops every delivery of the request at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from streamtts.schemas import AudioChunk, WordTiming
from streamtts.schemas.captions import retimed


@dataclass
class Delivery:
    """One client's live stream of one request's audio."""

    request_id: str
    sent_ms: float = 0.0
    """Audio written to the client so far (the frame being written counts: it is on the wire)."""
    stopped: bool = False
    ended: bool = False
    """The stream ended by itself (all audio written, or the client went away)."""
    on_stop: Callable[[], None] | None = None
    """Called once when someone else stops it (a WebSocket session then drops its queue)."""

    def wrote(self, audio_ms: float) -> None:
        self.sent_ms += audio_ms

    @property
    def live(self) -> bool:
        return not (self.stopped or self.ended)

    def stop(self) -> None:
        """Nothing more of this request goes to this client."""
        if not self.live:
            return
        self.stopped = True
        if self.on_stop is not None:
            self.on_stop()


def heard_ms(deliveries: Sequence[Delivery], played_ms: float | None) -> float | None:
    """What the listener heard: the most any client was sent, or the client's own playback
    position if less; None when the request had no live delivery (nothing to measure)."""
    if not deliveries:
        return None
    sent = max(d.sent_ms for d in deliveries)
    return sent if played_ms is None else min(sent, played_ms)


def words_heard(chunks: Sequence[AudioChunk], spoken_ms: float) -> list[WordTiming] | None:
    """The words whose audio began within the first `spoken_ms` of the request (timed from the
    request's start, as the result's `words_spoken`); None without timestamps."""
    audio = [c for c in chunks if not c.cancelled]
    if not any(c.words is not None for c in audio):
        return None
    words = retimed([(c.duration_ms, c.offset_ms, c.words or []) for c in audio])
    return [w for w in words if w.start_ms < spoken_ms]
