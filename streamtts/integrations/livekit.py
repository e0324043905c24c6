"""streamtts as a livekit-agents TTS (`pip install 'streamtts[livekit]'`).

    from streamtts.integrations.livekit import TTS
    session = AgentSession(tts=TTS(base_url="http://gateway:8080", api_key="…", voice="en_joe"), …)

`stream()` is a real `SynthesizeStream`: the LLM's tokens go to the gateway as they are pushed
(one WebSocket turn, one streamed utterance in the pipeline), so the first clause is spoken
as soon as it is whole, with no sentence tokenizer or `StreamAdapter` in front. Audio comes back
as 24 kHz pcm frames, with word-aligned transcripts (`aligned_transcript`: our word timestamps
as `TimedString`s). An interruption closes the stream: the turn is cancelled at the gateway,
which stops the audio and cancels the request upstream (its result says what was spoken).
"""

from __future__ import annotations

import asyncio
import contextlib
import unicodedata

from livekit.agents import APIConnectionError, APIConnectOptions, tts, utils
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, TimedString

from streamtts.integrations.ws_client import (
    DEFAULT_BASE_URL,
    DEFAULT_MAX_BUFFER_DELAY_MS,
    SAMPLE_RATE,
    Received,
    ReplyError,
    ReplyTarget,
    StreamedReply,
)


class TTS(tts.TTS):
    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str,
        voice: str = "auto",
        language: str = "auto",
        max_buffer_delay_ms: int = DEFAULT_MAX_BUFFER_DELAY_MS,
        speed: float = 1.0,
    ) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=True, aligned_transcript=True),
            sample_rate=SAMPLE_RATE,
            num_channels=1,
        )
        self._target = ReplyTarget(base_url, api_key, voice, language, max_buffer_delay_ms, speed)

    @property
    def model(self) -> str:
        return "streamtts"

    @property
    def provider(self) -> str:
        return "streamtts"

    def reply(self) -> StreamedReply:
        return self._target.reply()

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        return _Chunked(tts=self, input_text=text, conn_options=conn_options)

    def stream(
        self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.SynthesizeStream:
        return _Stream(tts=self, conn_options=conn_options)


async def _emit(reply: StreamedReply, emitter: tts.AudioEmitter, stream: _Stream | None = None) -> None:
    """The reply's audio and word timings into livekit's emitter, until its end."""
    try:
        async for item in reply.received():
            if stream is not None:
                stream.gateway_request_id = reply.request_id
            _push(item, emitter)
            if item.done is not None:
                return
    except ReplyError as err:
        raise APIConnectionError(f"streamtts refused or failed the reply: {err}") from err


def _push(item: Received, emitter: tts.AudioEmitter) -> None:
    if item.audio:
        emitter.push(item.audio)
    if item.words:
        emitter.push_timed_transcript(
            [
                TimedString(_spoken(w.text + w.trailing), start_time=w.start_s, end_time=w.end_s)
                for w in item.words
            ]
        )


def _spoken(text: str) -> str:
    """A word with what follows it, as livekit joins transcripts: a word that ends a span
    carries its punctuation but not the space after it (the next span begins at the next
    word), so one is added — except after CJK, which is written without spaces."""
    if text and not text[-1].isspace() and unicodedata.east_asian_width(text[-1]) not in ("W", "F"):
        return text + " "
    return text


class _Chunked(tts.ChunkedStream):
    """Whole text (livekit's `synthesize`): one turn with all of it."""

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        output_emitter.initialize(
            request_id=utils.shortuuid(), sample_rate=SAMPLE_RATE, num_channels=1, mime_type="audio/pcm"
        )
        tts_: TTS = self._tts  # type: ignore[assignment]  # ours
        try:
            async with tts_.reply() as reply:
                await reply.text(self.input_text)
                await reply.end()
                await _emit(reply, output_emitter)
        except OSError as err:
            raise APIConnectionError(f"streamtts gateway unreachable: {err}") from err
        output_emitter.flush()


class _Stream(tts.SynthesizeStream):
    """Tokens in as the LLM writes them; one turn per stream."""

    gateway_request_id: str | None = None
    """The pipeline's request id of this reply (its status, result and trace go by it)."""

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        segment = utils.shortuuid()
        output_emitter.initialize(
            request_id=segment, sample_rate=SAMPLE_RATE, num_channels=1, mime_type="audio/pcm", stream=True
        )
        output_emitter.start_segment(segment_id=segment)
        tts_: TTS = self._tts  # type: ignore[assignment]  # ours
        finished = False
        try:
            async with tts_.reply() as reply:

                async def send() -> None:
                    async for data in self._input_ch:
                        if isinstance(data, self._FlushSentinel):
                            await reply.flush()  # livekit's segment end: speak what is held
                        else:
                            self._mark_started()
                            await reply.text(data)
                    await reply.end()

                sender = asyncio.create_task(send(), name="streamtts-send")
                try:
                    await _emit(reply, output_emitter, self)
                    finished = True
                finally:
                    if not finished:
                        # Interrupted (the stream closed, or failed): barge-in at the gateway.
                        await reply.cancel()
                    sender.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await sender
        except OSError as err:
            raise APIConnectionError(f"streamtts gateway unreachable: {err}") from err
        output_emitter.end_segment()
