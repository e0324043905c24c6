"""`streamtts eval`'s pipeline part: real requests through the whole Kafka pipeline, audio as
a subscriber gets it (the raw model and the speech core are in `speech_eval`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from streamtts.bench.speech_eval import PIPELINE_RATE, EvalSentence, Progress, Rendering, _say
from streamtts.errors import ConfigError

PIPELINE_IN_FLIGHT = 2
"""Requests the eval keeps in the pipeline at once. It measures speech, not overload: sent
all at once (104 sentences), spans waited behind each other past their synthesis budgets
and came back as the "please wait" clip (zh 0.61 instead of 0.24); the load benchmarks
measure that."""


async def render_pipeline(
    kafka: Any,
    sentences: Sequence[EvalSentence],
    *,
    timeout_s: float = 600.0,
    progress: Progress = _say,
    in_flight: int = PIPELINE_IN_FLIGHT,
) -> list[Rendering]:
    """Real requests through a running pipeline on `kafka`'s topics; PCM as subscribers get it.
    At most `in_flight` requests are in the pipeline at once; `timeout_s` bounds the whole run."""
    from streamtts.producers.request_producer import RequestProducer
    from streamtts.runtime.topics import TopicNames
    from streamtts.schemas import TTSRequest
    from streamtts.sinks.subscriber import AudioSubscriber

    built = [
        (TTSRequest.new(s.text, voice="auto", format="pcm", sample_rate=PIPELINE_RATE), s) for s in sentences
    ]
    requests = {request.request_id: s for request, s in built}
    topics = TopicNames(kafka.topic_prefix)
    out: dict[str, Rendering] = {}
    waiting = [request for request, _ in built]
    waiting.reverse()  # popped from the end: sent in the set's order
    async with AudioSubscriber(kafka, topics.audio, request_ids=list(requests)) as sub:
        async with RequestProducer(kafka, topics) as producer:
            for _ in range(max(1, in_flight)):
                if waiting:
                    await producer.submit(waiting.pop())
            async for audio in sub.completed(timeout_s=timeout_s):
                if waiting:  # one finished: the next one goes in
                    await producer.submit(waiting.pop())
                pcm = np.frombuffer(audio.data, dtype="<i2").astype(np.float32) / 32768.0
                joins = tuple(np.cumsum([len(c.audio) // 2 for c in audio.chunks])[:-1].tolist())
                out[audio.request_id] = Rendering(
                    requests[audio.request_id], "pipeline", pcm, audio.sample_rate, None, joins
                )
                progress(f"pipeline {len(out)}/{len(requests)}")
    missing = [requests[r].id for r in requests if r not in out]
    if missing:
        raise ConfigError(f"the pipeline returned no audio for {', '.join(missing)} within {timeout_s:.0f} s")
    return [out[r] for r in requests]


async def pipeline_part(
    settings: Any, renderer: Any, sentences: Sequence[EvalSentence], progress: Progress
) -> list[Rendering]:
    """Topics on a fresh prefix, all stages in this process sharing the loaded model."""
    import dataclasses

    from streamtts.infra.topics import apply_topics
    from streamtts.runtime.pipeline_settings import PipelineSettings
    from streamtts.runtime.settings import Settings
    from streamtts.schemas.names import STAGES
    from streamtts.worker import Worker

    prefix = f"eval{time.strftime('%Y%m%d%H%M%S')}-"
    kafka = dataclasses.replace(settings.kafka, topic_prefix=prefix)
    await apply_topics(kafka)
    worker = Worker(
        list(STAGES), Settings(kafka=kafka, s3=settings.s3), PipelineSettings.from_env(), renderer=renderer
    )
    await worker.start()
    try:
        return await render_pipeline(kafka, sentences, progress=progress)
    finally:
        await worker.stop()
