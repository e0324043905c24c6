"""One sentence's (or turn's) audio to a WebSocket session: its chunks in order as events and
binary frames — or as fixed telephony frames, paced as configured — then `completed`; a failed
or late request as an `error` event. The session decides which request is forwarded when
(`ws_session`); this writes one."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from streamtts.gateway.delivery import Delivery
from streamtts.gateway.framing import Framer, Pacer, media_event
from streamtts.gateway.request_state import RequestState, StreamFailed, StreamIncomplete
from streamtts.gateway.service import Gateway
from streamtts.gateway.ws_events import (
    Event,
    chunk_event,
    completed_event,
    degraded_event,
    marks_event,
    words_event,
)
from streamtts.gateway.ws_outbound import Outbound
from streamtts.gateway.ws_start import StartMessage


@dataclass(frozen=True)
class AudioForward:
    out: Outbound
    gw: Gateway
    config: StartMessage
    session_id: str

    async def run(
        self, state: RequestState, delivery: Delivery, base: Event, pacer: Pacer, wait_s: float
    ) -> None:
        """Forward `state`'s audio until its last chunk (or a cancel stops `delivery`); `wait_s`:
        the longest wait for a chunk before the request is reported late."""
        out, framing = self.out, self.config.frame_ms is not None
        session_ms, frames_before = out.queued_ms, out.queued_frames
        sentence_ms = 0.0
        framer: Framer | None = None
        put = functools.partial(out.frame, delivery)
        try:
            async for chunk in state.chunks_in_order(wait_s, delivery):
                if chunk.cancelled:  # a marker: no audio to send (see `completed`)
                    continue
                if chunk.seq == 0 and chunk.part == 0:
                    self.gw.observe_first_audio("ws", state)
                if chunk.degradation is not None:
                    await put(degraded_event(base, chunk))
                if chunk.words is not None:
                    await put(words_event(base, chunk, sentence_ms, session_ms))
                if chunk.marks:
                    await put(marks_event(base, chunk, sentence_ms, session_ms))
                sentence_ms += chunk.duration_ms
                if framing:  # fixed frames instead of one frame per chunk
                    if framer is None:
                        framer = Framer(chunk.format, chunk.sample_rate, self.config.frame_ms or 20)
                    await self._send_frames(delivery, framer.push(chunk.audio), pacer)
                    continue
                await put(chunk_event(base, chunk))
                await put(chunk.audio, chunk.duration_ms)
                self.gw.metrics.ws_frames.inc()
                self.gw.metrics.audio_bytes.labels("ws").inc(len(chunk.audio))
            if delivery.stopped:
                return  # cancelled from elsewhere: the session's barge-in drops the rest
            if framer is not None:  # the sentence's last partial frame, padded
                await self._send_frames(delivery, framer.flush(), pacer)
            await put(completed_event(base, state, self.gw.trace_id(state)), ends=True)
        except (StreamFailed, StreamIncomplete) as err:
            await put({"type": "error", **base, "code": "request_failed", "message": str(err)}, ends=True)
        except TimeoutError:
            await put({"type": "error", **base, "code": "timeout", "message": "no audio in time"}, ends=True)
        finally:
            # Framed, the client gets whole frames (the last one padded): that is its clock. Added,
            # not set: a cut of another context meanwhile took its dropped audio off the clock.
            framed_ms = (out.queued_frames - frames_before) * (self.config.frame_ms or 20)
            out.queued_ms += framed_ms if framing else sentence_ms

    async def _send_frames(self, delivery: Delivery, frames: list[bytes], pacer: Pacer) -> None:
        """Telephony frames, binary or as media events, paced as configured."""
        frame_ms = self.config.frame_ms or 20
        for frame in frames:
            await pacer.wait_turn()
            sent = self.out.queued_frames
            if self.config.frames == "media":
                await self.out.frame(
                    delivery, media_event(frame, sent + 1, sent * frame_ms, self.session_id), frame_ms
                )
            else:
                await self.out.frame(delivery, frame, frame_ms)
            self.gw.metrics.ws_frames.inc()
            self.gw.metrics.audio_bytes.labels("ws").inc(len(frame))
            self.out.queued_frames += 1
