"""`streamtts eval`'s pipeline part: real requests through the whole Kafka pipeline, audio as
a subscriber gets it (the raw model and the speech core are in `speech_eval`).

Two systems on the same worker and topics: **pipeline** sends each sentence whole, one
request; **streamed** sends it as a streamed utterance (`schemas.utterance`), token by token
at an LLM's pace, so the segment stage cuts it as the text arrives."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from streamtts.bench.speech_eval import PIPELINE_RATE, EvalSentence, Progress, Rendering, _say
from streamtts.bench.token_stream import stream_tokens, write_paced
from streamtts.errors import ConfigError

PIPELINE_IN_FLIGHT = 2
"""Requests the eval keeps in the pipeline at once. It measures speech, not overload: sent
all at once (104 sentences), spans waited behind each other past their synthesis budgets
and came back as the "please wait" clip (zh 0.61 instead of 0.24); the load benchmarks
measure that."""
STREAM_TOKENS_PER_S = 25.0
"""The pace of a streamed sentence's tokens: an LLM's 20–60 tokens a second (docs/streamed-text.md)."""


def _rendering(audio: Any, sentence: EvalSentence, system: str, sent_at: float) -> Rendering:
    pcm = np.frombuffer(audio.data, dtype="<i2").astype(np.float32) / 32768.0
    joins = tuple(np.cumsum([len(c.audio) // 2 for c in audio.chunks])[:-1].tolist())
    return Rendering(sentence, system, pcm, audio.sample_rate, audio.first_chunk_at - sent_at, joins)


async def render_pipeline(
    kafka: Any,
    sentences: Sequence[EvalSentence],
    *,
    timeout_s: float = 600.0,
    progress: Progress = _say,
    in_flight: int = PIPELINE_IN_FLIGHT,
    stream_tokens_per_s: float | None = None,
    stream_delay_ms: int | None = None,
) -> list[Rendering]:
    """Real requests through a running pipeline on `kafka`'s topics; PCM as subscribers get it.
    At most `in_flight` requests are in the pipeline at once; `timeout_s` bounds the whole run.
    stream_tokens_per_s: send each sentence as a streamed utterance, its tokens
    (`stream_tokens`) at this pace, then `end` (system "streamed"); None: whole (system
    "pipeline"). A rendering's `first_audio_s` is from its submission (streamed: the opening
    record, just before its first token) to its first chunk at the subscriber.
    stream_delay_ms: the utterances' `max_buffer_delay_ms` (None: the contract's default)."""
    from streamtts.producers.request_producer import RequestProducer
    from streamtts.runtime.topics import TopicNames
    from streamtts.schemas import TextDelta, TTSRequest
    from streamtts.sinks.subscriber import AudioSubscriber

    streamed = stream_tokens_per_s is not None
    if stream_tokens_per_s is not None and stream_tokens_per_s <= 0:
        raise ConfigError("the streamed pace must be > 0 tokens per second")
    system = "streamed" if streamed else "pipeline"
    fields: dict[str, object] = {"voice": "auto", "format": "pcm", "sample_rate": PIPELINE_RATE}
    if streamed:
        fields["stream"] = {} if stream_delay_ms is None else {"max_buffer_delay_ms": stream_delay_ms}
    built = [(TTSRequest.new("" if streamed else s.text, **fields), s) for s in sentences]
    requests = {request.request_id: s for request, s in built}
    topics = TopicNames(kafka.topic_prefix)
    out: dict[str, Rendering] = {}
    sent_at: dict[str, float] = {}
    waiting = [request for request, _ in built]
    waiting.reverse()  # popped from the end: sent in the set's order

    async def send(producer: RequestProducer, request: TTSRequest) -> None:
        sent_at[request.request_id] = time.monotonic()
        await producer.submit(request)
        if stream_tokens_per_s is None:
            return
        rid, tenant = request.request_id, request.tenant

        async def delta(token: str) -> object:
            return await producer.send_delta(
                TextDelta(request_id=rid, tenant=tenant, delta=token), wait=False
            )

        await write_paced(stream_tokens(requests[rid].text), stream_tokens_per_s, delta)
        await producer.send_delta(TextDelta(request_id=rid, tenant=tenant, end=True))

    try:
        async with (
            AudioSubscriber(kafka, topics.audio, request_ids=list(requests)) as sub,
            RequestProducer(kafka, topics) as producer,
            asyncio.TaskGroup() as senders,  # each request's sending (a streamed one's pacing)
        ):
            for _ in range(max(1, in_flight)):
                if waiting:
                    senders.create_task(send(producer, waiting.pop()))
            async for audio in sub.completed(timeout_s=timeout_s):
                if waiting:  # one finished: the next one goes in
                    senders.create_task(send(producer, waiting.pop()))
                rid = audio.request_id
                out[rid] = _rendering(audio, requests[rid], system, sent_at[rid])
                progress(f"{system} {len(out)}/{len(requests)}")
    except ExceptionGroup as group:  # a sender failed: its error, not the group's
        raise group.exceptions[0] from group
    missing = [requests[r].id for r in requests if r not in out]
    if missing:
        raise ConfigError(
            f"the {system} run returned no audio for {', '.join(missing)} within {timeout_s:.0f} s"
        )
    return [out[r] for r in requests]


async def pipeline_part(
    settings: Any,
    renderer: Any,
    sentences: Sequence[EvalSentence],
    progress: Progress,
    *,
    stream_tokens_per_s: float | None = None,
    stream_delay_ms: int | None = None,
) -> list[Rendering]:
    """Topics on a fresh prefix, all stages in this process sharing the loaded model; with
    `stream_tokens_per_s`, the sentences again as streamed utterances on the same worker."""
    import dataclasses

    from streamtts.infra.topics import apply_topics, drop_topics
    from streamtts.runtime.pipeline_settings import PipelineSettings
    from streamtts.runtime.settings import Settings
    from streamtts.runtime.topology import STAGES
    from streamtts.worker import Worker

    prefix = f"eval{time.strftime('%Y%m%d%H%M%S')}-"
    kafka = dataclasses.replace(settings.kafka, topic_prefix=prefix)
    await apply_topics(kafka)
    worker = Worker(
        list(STAGES), Settings(kafka=kafka, s3=settings.s3), PipelineSettings.from_env(), renderer=renderer
    )
    await worker.start()
    try:
        out = await render_pipeline(kafka, sentences, progress=progress)
        if stream_tokens_per_s is not None:
            out += await render_pipeline(
                kafka,
                sentences,
                progress=progress,
                stream_tokens_per_s=stream_tokens_per_s,
                stream_delay_ms=stream_delay_ms,
            )
        return out
    finally:
        await worker.stop()
        await drop_topics(kafka)  # a single-use prefix; best effort
