"""streamtts as a pipecat TTS service (`pip install 'streamtts[pipecat]'`).

    from streamtts.integrations.pipecat import StreamTTSService
    tts = StreamTTSService(base_url="http://gateway:8080", api_key="…", voice="en_joe")
    pipeline = Pipeline([transport.input(), stt, user_agg, llm, tts, transport.output(), bot_agg])

The LLM's tokens go to the gateway as they come (`TextAggregationMode.TOKEN`: pipecat holds
nothing back); each pipecat TTS context (a turn) is one WebSocket turn, one streamed utterance
in the pipeline, whose first clause is spoken as soon as it is whole. Audio comes back as
`TTSAudioRawFrame`s (24 kHz pcm), our word timestamps as pipecat's word timestamps (its timed
`TTSTextFrame`s); an interruption cancels the turn at the gateway, which stops the audio and
cancels the request upstream; what the cancelled turn had spoken comes back as the event
`on_turn_cancelled` (context id, `spoken_ms`), for the agent's context.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any

from pipecat.frames.frames import ErrorFrame, Frame, TTSAudioRawFrame, TTSStoppedFrame
from pipecat.services.tts_service import TextAggregationMode, TTSService

from streamtts.integrations.ws_client import (
    DEFAULT_BASE_URL,
    DEFAULT_MAX_BUFFER_DELAY_MS,
    SAMPLE_RATE,
    ReplyError,
    ReplyTarget,
    StreamedReply,
)


class StreamTTSService(TTSService):
    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str,
        voice: str = "auto",
        language: str = "auto",
        max_buffer_delay_ms: int = DEFAULT_MAX_BUFFER_DELAY_MS,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            text_aggregation_mode=TextAggregationMode.TOKEN,
            push_text_frames=False,
            push_start_frame=True,
            pause_frame_processing=False,
            sample_rate=SAMPLE_RATE,
            **kwargs,
        )
        self._target = ReplyTarget(base_url, api_key, voice, language, max_buffer_delay_ms)
        self._replies: dict[str, tuple[StreamedReply, asyncio.Task[None]]] = {}
        self.request_ids: dict[str, str] = {}
        """pipecat context id → the pipeline's request id (its status, result and trace)."""
        self.cancelled_spoken_ms: dict[str, float] = {}
        """pipecat context id → the audio (ms) a cancelled turn had spoken, as the gateway says
        (also told to `@tts.event_handler("on_turn_cancelled")` handlers: (tts, context_id, ms))."""
        self._register_event_handler("on_turn_cancelled")

    def can_generate_metrics(self) -> bool:
        return True

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """A token of the turn `context_id`: the turn opens with its first."""
        try:
            entry = self._replies.get(context_id)
            if entry is None:
                reply = self._target.reply()
                await reply.__aenter__()
                task = self.create_task(self._receive(reply, context_id), f"streamtts-{context_id}")
                self._replies[context_id] = entry = (reply, task)
            await entry[0].text(text)
            await self.start_tts_usage_metrics(text)
        except OSError as err:
            yield ErrorFrame(error=f"streamtts gateway unreachable: {err}")
            yield TTSStoppedFrame(context_id=context_id)
            return
        yield None

    async def flush_audio(self, context_id: str | None = None) -> None:
        """The turn's text is complete: the rest is spoken, then the turn ends."""
        ctx = context_id or self.get_active_audio_context_id()
        entry = self._replies.get(ctx) if ctx else None
        if entry is not None:
            await entry[0].end()

    async def on_audio_context_interrupted(self, context_id: str) -> None:
        """Barge-in: the gateway silences the turn and cancels its request upstream."""
        entry = self._replies.pop(context_id, None)
        if entry is not None:
            reply, task = entry
            await reply.cancel()
            with contextlib.suppress(TimeoutError):  # what was spoken, if the gateway says it soon
                async with asyncio.timeout(1.0):
                    await asyncio.shield(task)
            await self.cancel_task(task)
            await reply.__aexit__(None, None, None)
        await super().on_audio_context_interrupted(context_id)

    async def _receive(self, reply: StreamedReply, context_id: str) -> None:
        try:
            async for item in reply.received():
                if reply.request_id:
                    self.request_ids[context_id] = reply.request_id
                if item.audio and self.audio_context_available(context_id):
                    await self.stop_ttfb_metrics()
                    frame = TTSAudioRawFrame(
                        audio=item.audio, sample_rate=SAMPLE_RATE, num_channels=1, context_id=context_id
                    )
                    await self.append_to_audio_context(context_id, frame)
                if item.words:
                    await self.add_word_timestamps([(w.text, w.start_s) for w in item.words], context_id)
                if item.done is not None:
                    if item.done.get("type") == "cancelled":
                        spoken = float(item.done.get("spoken_ms", 0.0))
                        self.cancelled_spoken_ms[context_id] = spoken
                        await self._call_event_handler("on_turn_cancelled", context_id, spoken)
                    break
        except ReplyError as err:
            await self.push_error(error_msg=f"streamtts: {err}")
        finally:
            if self.audio_context_available(context_id):
                await self.append_to_audio_context(context_id, TTSStoppedFrame(context_id=context_id))
                await self.remove_audio_context(context_id)
            if self._replies.get(context_id, (None,))[0] is reply:
                self._replies.pop(context_id, None)
                await reply.__aexit__(None, None, None)

    async def cleanup(self) -> None:
        for reply, task in list(self._replies.values()):
            await self.cancel_task(task)
            await reply.__aexit__(None, None, None)
        self._replies.clear()
        await super().cleanup()
