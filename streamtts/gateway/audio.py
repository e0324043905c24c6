"""HTTP audio bodies: stream a request's chunks as they arrive, or serve the finished file."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass

import orjson
from starlette.responses import Response, StreamingResponse

from streamtts.audio import formats
from streamtts.audio.audio_codec import LiveStream
from streamtts.audio.codecs import assemble
from streamtts.gateway import stored_files
from streamtts.gateway.delivery import Delivery
from streamtts.gateway.errors import ApiError, request_failed
from streamtts.gateway.framing import Framer, Pacer, frameable, frameable_choices
from streamtts.gateway.metrics import GatewayMetrics
from streamtts.gateway.request_state import RequestState, StreamFailed, StreamIncomplete
from streamtts.gateway.service import BROKER_RETRY_AFTER_S, Gateway
from streamtts.runtime.lifecycle import cancel_and_wait
from streamtts.schemas import AudioChunk


def content_type(fmt: str, sample_rate: int) -> str:
    return formats.get(fmt).media_type(sample_rate)


def _headers(state: RequestState, extra: dict[str, str] | None = None) -> dict[str, str]:
    name = f"{state.request_id}{formats.get(state.format).extension}"
    trace = {"traceparent": state.traceparent} if state.traceparent else {}
    return {
        "X-Request-Id": state.request_id,
        "Content-Disposition": f'inline; filename="{name}"',
        **trace,
        **(extra or {}),
    }


@dataclass(frozen=True)
class Framing:
    """Telephony delivery of a stream: frames of exactly `frame_ms`, paced or not."""

    frame_ms: int
    realtime: bool


async def audio_response(
    gw: Gateway, state: RequestState, *, endpoint: str, framing: Framing | None = None
) -> Response:
    """Chunked streaming while the request is in flight; the whole file once it is done.
    With `framing` (headerless formats: pcm, mulaw, alaw): always a stream of fixed frames."""
    if state.status == "failed":
        raise request_failed(state)
    stored_files.check_retained(state)
    if framing is not None:
        if state.format not in frameable():
            raise ApiError(400, "invalid_request", f"frame_ms needs format {frameable_choices()}")
        return await _framed(gw, state, framing, endpoint)
    if state.streamed:
        return _whole(
            state,
            assemble([c.audio for c in state.chunks], state.format, sample_rate=state.chunks[0].sample_rate),
            state.chunks[0].sample_rate,
        )
    if state.status == "completed" and state.result is not None and state.result.storage is not None:
        return await _stored(gw, state)
    delivery = state.deliver(Delivery(state.request_id))
    try:
        first, chunks = await _started(gw, state, delivery)
    except StreamIncomplete:
        return await _stored(gw, state)
    gw.observe_first_audio(endpoint, state)
    live = formats.get(state.format).live_stream
    if live is None:
        # Chunks that are whole files and cannot be joined on the fly (FLAC): answer when complete.
        rest = [c async for c in _guarded(chunks)]
        delivery.ended = True
        return _whole(
            state, assemble([first.audio, *(c.audio for c in rest)], state.format), first.sample_rate
        )
    body = _body(first, chunks, live, gw.metrics, endpoint, delivery)
    return StreamingResponse(
        body, media_type=content_type(state.format, first.sample_rate), headers=_headers(state)
    )


async def sse_response(gw: Gateway, state: RequestState, *, endpoint: str, input_chars: int) -> Response:
    """OpenAI's `stream_format: "sse"`: the same bytes as the audio stream, each piece a
    `speech.audio.delta` event (base64), then `speech.audio.done` with usage (input: the
    text's characters; output: audio in 20 ms units — our engines count no tokens). A format
    whose chunks cannot be joined on the fly (FLAC) comes as one delta, the whole file."""
    if state.status == "failed":
        raise request_failed(state)
    live = formats.get(state.format).live_stream
    delivery = state.deliver(Delivery(state.request_id))
    try:
        first, chunks = await _started(gw, state, delivery)
    except StreamIncomplete:
        raise ApiError(
            409, "not_streaming", "the request finished elsewhere; fetch its stored audio"
        ) from None
    gw.observe_first_audio(endpoint, state)

    async def whole() -> AsyncIterator[bytes]:
        rest = [c async for c in _guarded(chunks)]
        delivery.ended = True
        delivery.wrote(first.duration_ms + sum(c.duration_ms for c in rest))
        yield assemble([first.audio, *(c.audio for c in rest)], state.format)

    async def events() -> AsyncIterator[bytes]:
        pieces = whole() if live is None else _body(first, chunks, live, gw.metrics, endpoint, delivery)
        async for data in pieces:
            delta = {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")}
            yield b"data: " + orjson.dumps(delta) + b"\n\n"
        output = round(delivery.sent_ms / 20)
        usage = {"input_tokens": input_chars, "output_tokens": output, "total_tokens": input_chars + output}
        yield b"data: " + orjson.dumps({"type": "speech.audio.done", "usage": usage}) + b"\n\n"

    return StreamingResponse(
        events(), media_type="text/event-stream", headers={**_headers(state), "Cache-Control": "no-cache"}
    )


class BrokersLost(Exception):
    """No Kafka broker answered for `broker_loss_s` while a response waited for audio."""


async def _while_brokers_answer(gw: Gateway, chunks: AsyncIterator[AudioChunk]) -> AsyncIterator[AudioChunk]:
    """`chunks`, ended by `BrokersLost` once no broker has answered for `broker_loss_s`:
    a response waiting on a pipeline it cannot reach fails in bounded time, not at the
    request timeout."""
    loss_s = gw.settings.broker_loss_s
    lost = asyncio.create_task(gw.broker.lost_for(loss_s))
    try:
        while True:
            following = asyncio.ensure_future(anext(chunks))
            await asyncio.wait({following, lost}, return_when=asyncio.FIRST_COMPLETED)
            if not following.done():
                await cancel_and_wait(following)
                raise BrokersLost(f"no Kafka broker has answered for {loss_s:g} s")
            try:
                yield following.result()
            except StopAsyncIteration:
                return
    finally:
        await cancel_and_wait(lost)


def _unavailable(err: BrokersLost) -> ApiError:
    return ApiError(
        503, "kafka_unavailable", f"{err}; retry later", {"Retry-After": str(BROKER_RETRY_AFTER_S)}
    )


async def _started(
    gw: Gateway, state: RequestState, delivery: Delivery
) -> tuple[AudioChunk, AsyncIterator[AudioChunk]]:
    """The first chunk and the rest, once the first arrives: a response waits for it before
    answering, as its sample rate goes in the headers and a request that fails early still
    gets a proper error status (ApiError).

    Raises:
        ApiError, StreamIncomplete (the caller's to answer), StopAsyncIteration (no chunk).
    """
    timeout = gw.settings.request_timeout_s
    chunks = _while_brokers_answer(gw, state.chunks_in_order(timeout, delivery))
    try:
        first = await _first(chunks, delivery)
    except BrokersLost as err:
        raise _unavailable(err) from None
    except StreamFailed:
        raise request_failed(state) from None
    except TimeoutError:
        raise ApiError(504, "timeout", f"no audio within {timeout:g} s") from None
    return first, chunks


async def _first(chunks: AsyncIterator[AudioChunk], delivery: Delivery) -> AudioChunk:
    """The first chunk; a stream that never starts is no live delivery."""
    try:
        return await anext(chunks)
    except BaseException:
        delivery.ended = True
        raise


async def _guarded(chunks: AsyncIterator[AudioChunk]) -> AsyncIterator[AudioChunk]:
    try:
        async for c in chunks:
            yield c
    except (StreamFailed, StreamIncomplete, TimeoutError, BrokersLost) as err:
        # Mid-stream the status line is already sent: aborting the body is the only honest
        # signal (the client sees a truncated chunked response, not a short "success").
        raise ConnectionAbortedError(f"stream ended early: {type(err).__name__}") from err


async def _body(
    first: AudioChunk,
    chunks: AsyncIterator[AudioChunk],
    live: LiveStream,
    metrics: GatewayMetrics,
    endpoint: str,
    delivery: Delivery,
) -> AsyncIterator[bytes]:
    try:
        header = live.header(first.audio, first.sample_rate)  # a live WAV's header of unknown length
        if header:
            yield header
        async for c in _prepend(first, _guarded(chunks)):
            if delivery.stopped:  # a cancel: the rest is dropped, the body ends
                return
            data = live.payload(c.audio)
            metrics.audio_bytes.labels(endpoint).inc(len(data))
            delivery.wrote(c.duration_ms)
            yield data
    finally:
        delivery.ended = True


async def _prepend(first: AudioChunk, rest: AsyncIterator[AudioChunk]) -> AsyncIterator[AudioChunk]:
    yield first
    async for c in rest:
        yield c


async def _framed(gw: Gateway, state: RequestState, framing: Framing, endpoint: str) -> Response:
    delivery = state.deliver(Delivery(state.request_id))
    try:
        first, chunks = await _started(gw, state, delivery)
    except (StreamIncomplete, StopAsyncIteration):
        raise ApiError(
            409, "not_streaming", "framing needs the live stream; fetch the stored audio"
        ) from None

    async def frames() -> AsyncIterator[bytes]:
        try:
            async for frame in _paced_frames():
                yield frame
        finally:
            delivery.ended = True

    async def _paced_frames() -> AsyncIterator[bytes]:
        framer = Framer(state.format, first.sample_rate, framing.frame_ms)
        pacer = Pacer(framing.frame_ms, framing.realtime)
        async for c in _prepend(first, _guarded(chunks)):
            for frame in framer.push(c.audio):
                await pacer.wait_turn()
                if delivery.stopped:  # a cancel during the wait: not one frame more
                    return
                gw.metrics.audio_bytes.labels(endpoint).inc(len(frame))
                delivery.wrote(framing.frame_ms)
                yield frame
        if delivery.stopped:
            return
        for frame in framer.flush():
            await pacer.wait_turn()
            if delivery.stopped:
                return
            delivery.wrote(framing.frame_ms)
            yield frame

    return StreamingResponse(
        frames(), media_type=content_type(state.format, first.sample_rate), headers=_headers(state)
    )


def _whole(state: RequestState, data: bytes, sample_rate: int) -> Response:
    return Response(data, media_type=content_type(state.format, sample_rate), headers=_headers(state))


async def _stored(gw: Gateway, state: RequestState) -> Response:
    data = await stored_files.stored_audio(gw.store, state)
    assert state.result is not None
    return _whole(state, data, state.result.sample_rate)
