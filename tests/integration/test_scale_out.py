"""Scale-out: two synthesize workers share the load; killing one loses no request."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import orjson
import pytest

from streamtts.producers.request_producer import RequestProducer
from streamtts.producers.result_waiter import ResultWaiter
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import TTSRequest
from streamtts.sinks.subscriber import AudioSubscriber
from streamtts.worker import Worker
from tests.services import Services

pytestmark = [pytest.mark.integration, pytest.mark.model]


class SynthProcess:
    """A `streamtts run --stage synthesize` process whose JSON log events we can await."""

    def __init__(self, name: str, env: dict[str, str]) -> None:
        self.name = name
        self.env = env
        self.events: list[dict] = []
        self._waiters: list[tuple[str, asyncio.Future[dict]]] = []
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "streamtts.cli.main",
            "run",
            "--stage",
            "synthesize",
            env=self.env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc and self.proc.stderr
        async for line in self.proc.stderr:
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            self.events.append(event)
            for name, fut in list(self._waiters):
                if event.get("event") == name and not fut.done():
                    fut.set_result(event)
                    self._waiters.remove((name, fut))

    async def wait_for(self, event_name: str, timeout: float) -> dict:
        for e in self.events:
            if e.get("event") == event_name:
                return e
        fut: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        self._waiters.append((event_name, fut))
        return await asyncio.wait_for(fut, timeout)

    def synthesized_ids(self) -> set[str]:
        return {e["request_id"] for e in self.events if e.get("event") == "synthesized"}

    def unfinished_ids(self) -> set[str]:
        """Requests this worker synthesized a segment of, but not their last one."""
        done = {
            e["request_id"]
            for e in self.events
            if e.get("event") == "synthesized" and e["seq"] == e["total"] - 1
        }
        return self.synthesized_ids() - done

    async def kill(self) -> None:
        assert self.proc
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()
        if self._reader is not None:
            await self._reader  # every line it wrote before it died, read (the pipe ends)

    async def terminate(self) -> None:
        if self.proc and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._reader:
            self._reader.cancel()


async def test_two_synthesize_workers_split_load_and_survive_a_kill(
    kafka_settings: KafkaSettings, services: Services, topics: TopicNames, pipeline_settings
) -> None:
    env = dict(
        os.environ,
        STREAMTTS_KAFKA_BOOTSTRAP=kafka_settings.bootstrap_servers,
        STREAMTTS_TOPIC_PREFIX=kafka_settings.topic_prefix,
        STREAMTTS_SYNTH_THREADS="1",
        STREAMTTS_WARM_VOICES="jm_kumo",
        STREAMTTS_SESSION_TIMEOUT_S="6",
    )
    workers = [SynthProcess("a", env), SynthProcess("b", env)]
    rest = Worker(
        ["segment", "encode", "sink"],
        Settings(kafka=kafka_settings, s3=services.s3),
        pipeline_settings,
    )
    try:
        for w in workers:
            await w.start()
        await rest.start()
        for w in workers:
            await w.wait_for("worker_started", timeout=120)
        texts = [
            f"Request number {i}. It has a second sentence. And a third one to finish." for i in range(12)
        ]
        # With timestamps: the survivor must know where the interrupted request's audio stands.
        requests = [
            TTSRequest.new(t, language="en", voice="jm_kumo", format="mp3", timestamps=True) for t in texts
        ]
        ids = [r.request_id for r in requests]
        async with (
            ResultWaiter(kafka_settings) as waiter,
            AudioSubscriber(kafka_settings, topics.audio, request_ids=ids) as sub,
        ):
            async with RequestProducer(kafka_settings) as producer:
                await producer.submit_many(requests)
            # Killed right after its first segment: requests of 3 segments are left unfinished
            # (waiting for the other worker's first segment too let this one finish the request
            # it had started, 1 CI run in ~10: the request to follow is read from its log).
            await workers[0].wait_for("synthesized", timeout=120)
            await workers[0].kill()
            killed_saw = workers[0].synthesized_ids()
            interrupted = workers[0].unfinished_ids()
            assert interrupted, "killed after its first segment, before that request's last"
            received = {a.request_id: a async for a in sub.completed(timeout_s=300)}
            results = await waiter.wait(ids, timeout_s=60)
        assert set(received) == set(ids), "no request lost"
        assert all(results[i].status == "completed" for i in ids)
        for rid in ids:  # every request's audio is whole: all segments, in order
            audio = received[rid]
            assert [c.seq for c in audio.chunks if c.last_part] == list(range(audio.chunks[0].total))
            # Live word times are right across the takeover: each chunk starts where the
            # audio before it ends (the survivor recovered the sum from tts.pcm if needed).
            position = 0.0
            for chunk in audio.chunks:
                assert chunk.offset_ms is not None and abs(chunk.offset_ms - position) < 1.0, (rid, chunk.seq)
                assert chunk.words and all(position - 1 <= w.start_ms for w in chunk.words)
                position += chunk.duration_ms
            assert results[rid].words == audio.words
        survivor_saw = workers[1].synthesized_ids()
        assert killed_saw and survivor_saw, "both workers shared the load"
        assert interrupted <= survivor_saw, "the survivor finished the killed worker's requests"
        assert survivor_saw | killed_saw == set(ids)
    finally:
        await rest.stop()
        for w in workers:
            await w.terminate()
