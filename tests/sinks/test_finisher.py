"""The request finisher without Kafka or storage: what it stores, dead-letters and publishes,
and in which order."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from streamtts.runtime.dead_letters import DeadLetterPublisher
from streamtts.runtime.telemetry import Telemetry
from streamtts.schemas import CompletionResult, DeadLetter, RequestContext, StorageRef
from streamtts.sinks.assembler import AssembledRequest, StreamedPart
from streamtts.sinks.exceptions import PartitionRevoked, StorageUnavailable
from streamtts.sinks.finisher import RequestFinisher
from streamtts.sinks.storage_writer import StoredFiles
from streamtts.sinks.stored_audio import stored_audio
from streamtts.sinks.telemetry import SinkTelemetry
from tests.factories import request

REF = StorageRef(bucket="b", key="acme/x.wav", size=10, etag="e", content_type="audio/wav")
TP = ("tts.pcm", 3)


class _Writer:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.written: list[str] = []

    async def write(self, req: AssembledRequest) -> StoredFiles:
        self.written.append(req.ctx.request_id)
        if self.error is not None:
            raise self.error
        return StoredFiles(REF, None, None)


class _Outputs:
    def __init__(self, revoked: bool = False) -> None:
        self.sent: list[tuple[str, bytes | None, bytes]] = []
        self.headers: list[list[tuple[str, bytes]] | None] = []
        self.revoked = revoked

    async def __call__(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None
    ) -> None:
        if self.revoked:
            raise PartitionRevoked("tts.pcm/3 was revoked")
        self.sent.append((topic, key, value))
        self.headers.append(headers)


def _finisher(writer: _Writer, outputs: _Outputs) -> tuple[RequestFinisher, Telemetry]:
    telemetry = Telemetry()
    dead_letters = DeadLetterPublisher("sink", "tts.dlq.sink", outputs, telemetry)
    finisher = RequestFinisher(
        writer,  # type: ignore[arg-type]
        outputs,
        dead_letters,
        SinkTelemetry(telemetry, "sink"),
        results_topic="tts.results",
        stale_after_s=300.0,
    )
    return finisher, telemetry


def _assembled(
    *, samples: int = 2400, records: int = 2, delivery: dict[str, bool] | None = None
) -> AssembledRequest:
    return AssembledRequest(
        ctx=RequestContext.of(request(tenant="acme", delivery=delivery or {})),
        sample_rate=24000,
        pcm=np.zeros(samples, dtype="<i2").tobytes(),
        chunks=records,
        degraded=[],
        records=[(TP, offset, b"raw-%d" % offset, ()) for offset in range(records)],
        cancelled=samples < 2400,
    )


def _result(value: bytes) -> CompletionResult:
    return CompletionResult.from_bytes(value)


async def test_a_request_is_stored_then_its_result_published() -> None:
    writer, outputs = _Writer(), _Outputs()
    finisher, telemetry = _finisher(writer, outputs)
    req = _assembled()
    result = await finisher.finish(req)
    assert writer.written == [req.ctx.request_id]
    assert [(t, k) for t, k, _ in outputs.sent] == [("tts.results", req.ctx.request_id.encode())]
    assert _result(outputs.sent[0][2]) == result and result.status == "completed"
    assert result.storage == REF
    assert (
        telemetry.registry.get_sample_value("streamtts_requests_completed_total", {"status": "completed"})
        == 1
    )


async def test_a_storage_outage_dead_letters_every_record_then_fails_the_request() -> None:
    outputs = _Outputs()
    finisher, telemetry = _finisher(_Writer(StorageUnavailable("object storage failed 8 times")), outputs)
    req = _assembled(records=3)
    result = await finisher.finish(req)
    topics = [t for t, _, _ in outputs.sent]
    assert topics == ["tts.dlq.sink"] * 3 + ["tts.results"], "dead letters before the result"
    letters = [
        DeadLetter.from_record(k, v, h)
        for (_, k, v), h in zip(outputs.sent[:3], outputs.headers[:3], strict=True)
    ]
    assert [(d.offset, d.payload, d.reason) for d in letters] == [
        (i, b"raw-%d" % i, "storage_unavailable") for i in range(3)
    ]
    assert all(
        d.request_id == req.ctx.request_id and d.tenant == "acme" and d.stage == "sink" for d in letters
    )
    result_headers = dict(outputs.headers[3] or [])
    assert result_headers["ce_type"] == b"dev.streamtts.result.v1", "the result carries CloudEvents headers"
    assert result_headers["content-type"] == b"application/json"
    assert result.status == "failed" and result.error == "object storage failed 8 times"
    assert (
        telemetry.registry.get_sample_value("streamtts_requests_completed_total", {"status": "failed"}) == 1
    )


@pytest.mark.parametrize(
    ("delivery", "samples", "stored"),
    [
        ({"storage": False, "chunks": True}, 2400, False),
        ({"keep_on_cancel": False}, 1200, False),
        ({"keep_on_cancel": True}, 0, False),
        ({"keep_on_cancel": True}, 1200, True),
    ],
)
async def test_what_is_stored(delivery: dict[str, bool], samples: int, stored: bool) -> None:
    """Nothing without storage; a cancelled request's audio only when asked and non-empty."""
    writer, outputs = _Writer(), _Outputs()
    finisher, _ = _finisher(writer, outputs)
    result = await finisher.finish(_assembled(samples=samples, delivery=delivery))
    assert bool(writer.written) is stored
    assert (result.storage is not None) is stored
    assert len(outputs.sent) == 1, "a result in every case"


async def test_a_revoked_partition_publishes_nothing() -> None:
    finisher, telemetry = _finisher(_Writer(), _Outputs(revoked=True))
    with pytest.raises(PartitionRevoked):
        await finisher.finish(_assembled())
    assert (
        telemetry.registry.get_sample_value("streamtts_requests_completed_total", {"status": "completed"})
        is None
    )


async def test_a_stale_request_fails_visibly() -> None:
    outputs = _Outputs()
    finisher, telemetry = _finisher(_Writer(), outputs)
    ctx = RequestContext.of(request(tenant="acme"))
    result = await finisher.fail_incomplete(ctx, [1, 4])
    (sent,) = outputs.sent
    assert sent[0] == "tts.results" and _result(sent[2]) == result
    assert (
        result.status == "failed" and result.error == "incomplete: no audio for segments [1, 4] after 300 s"
    )
    assert result.completed_at <= datetime.now(UTC)
    labels = {"release": "stable", "outcome": "failed"}
    assert telemetry.registry.get_sample_value("streamtts_release_requests_total", labels) == 1


class _EncodingWriter(_Writer):
    """Makes the file as the storage writer does (`stored_audio`), then stores it."""

    async def write(self, req: AssembledRequest) -> StoredFiles:
        stored_audio(req)
        return await super().write(req)


async def test_parts_whose_frames_make_no_file_dead_letter_the_request_and_fail_it() -> None:
    """A hostile producer's file parts, "frames" that are not mp3: the request fails at once
    with the reason, its records go to the DLQ, and the sink goes on (nothing raised)."""
    outputs = _Outputs()
    finisher, _ = _finisher(_EncodingWriter(), outputs)
    req = AssembledRequest(
        ctx=RequestContext.of(request(tenant="acme", format="mp3")),
        sample_rate=24000,
        pcm=b"",
        chunks=2,
        degraded=[],
        records=[(TP, offset, b"raw-%d" % offset, ()) for offset in range(2)],
        streamed=(
            StreamedPart("frames", b"not mp3 at all", 1200, "opened"),
            StreamedPart("frames", b"\xff\xfb\x90\x00 nor this", 1200, "continued"),
        ),
    )
    result = await finisher.finish(req)
    assert [t for t, _, _ in outputs.sent] == ["tts.dlq.sink"] * 2 + ["tts.results"]
    letters = [
        DeadLetter.from_record(k, v, h)
        for (_, k, v), h in zip(outputs.sent[:2], outputs.headers[:2], strict=True)
    ]
    assert all(d.reason == letters[0].reason != "" for d in letters)
    assert result.status == "failed" and result.error is not None and "mp3" in result.error
