"""Dead letters in the Kafka Connect convention, built by the one pure function."""

from __future__ import annotations

from datetime import datetime

import pytest

from streamtts.errors import TransientError, failure_reason, is_transient
from streamtts.processors.segment.exceptions import EmptyText, TextTooLong
from streamtts.processors.synthesize.exceptions import UnknownVoiceError
from streamtts.runtime.dead_letters import SourceRecord, dead_letter_record
from streamtts.schemas import ContractError, DeadLetter, PcmChunk, wire
from streamtts.schemas.dead_letter import DlqHeader
from streamtts.schemas.headers import replay_headers
from tests import factories

SOURCE = SourceRecord("tts.requests", 2, 41, b"req-1", b"\xff not json", (("traceparent", b"00-abc-01"),))


def test_key_value_and_own_headers_stay_as_they_were() -> None:
    err = ContractError("request", "", "invalid_json", "not JSON")
    letter = dead_letter_record(stage="segment", source=SOURCE, error=err, tenant="acme", worker="w1")
    assert (letter.key, letter.payload) == (b"req-1", b"\xff not json")
    headers = letter.headers()
    assert headers[0] == ("traceparent", b"00-abc-01"), "the record's own headers come first, unchanged"
    named = dict(headers)
    assert named[DlqHeader.STAGE] == b"segment"
    assert named[DlqHeader.TOPIC] == b"tts.requests"
    assert (named[DlqHeader.PARTITION], named[DlqHeader.OFFSET]) == (b"2", b"41")
    assert named[DlqHeader.REASON] == b"invalid_json"
    assert named[DlqHeader.EXCEPTION_CLASS] == b"ContractError"
    assert named[DlqHeader.TENANT] == b"acme" and named[DlqHeader.REQUEST_ID] == b"req-1"


def test_a_dead_letter_parses_back_from_key_value_and_headers() -> None:
    letter = dead_letter_record(stage="sink", source=SOURCE, error=TimeoutError("slow"), tenant="acme")
    back = DeadLetter.from_record(letter.key, letter.payload, letter.headers())
    assert back == letter


def test_a_second_failure_adds_to_attempts_and_keeps_the_first_time() -> None:
    first = dead_letter_record(stage="segment", source=SOURCE, error=EmptyText("empty"))
    redriven = SourceRecord(
        SOURCE.topic,
        SOURCE.partition,
        99,
        first.key,
        first.payload,
        (
            *first.original_headers,
            (DlqHeader.ATTEMPTS, str(first.attempts).encode()),
            (DlqHeader.FIRST_FAILURE_AT, first.first_failure_at.isoformat().encode()),
        ),
    )
    second = dead_letter_record(stage="segment", source=redriven, error=EmptyText("empty"))
    assert second.attempts == 2 and second.first_failure_at == first.first_failure_at
    assert second.original_headers == SOURCE.headers, "old dead-letter headers are not carried twice"


def test_a_record_without_dead_letter_headers_is_refused_naming_the_header() -> None:
    with pytest.raises(ContractError, match=DlqHeader.STAGE):
        DeadLetter.from_record(b"k", b"v", [("other", b"1")])
    letter = dead_letter_record(stage="segment", source=SOURCE, error=EmptyText("x"))
    bad = [(k, b"soon" if k == DlqHeader.FAILED_AT else v) for k, v in letter.headers()]
    with pytest.raises(ContractError, match="failed_at"):
        DeadLetter.from_record(letter.key, letter.payload, bad)


@pytest.mark.parametrize(
    ("error", "reason", "transient"),
    [
        (ContractError("request", "voice", "missing", "required"), "missing", False),
        (TextTooLong("too long"), "text_too_long", False),
        (EmptyText("empty"), "empty_text", False),
        (UnknownVoiceError("nobody"), "unknown_voice", False),
        (TransientError("storage down"), "processing_error", True),
        (TimeoutError(), "timeout", True),
        (ConnectionResetError(), "processing_error", True),
        (KeyError("bug"), "processing_error", False),
    ],
)
def test_errors_carry_their_reason(error: BaseException, reason: str, transient: bool) -> None:
    assert failure_reason(error) == reason
    assert is_transient(error) is transient


def test_failed_at_is_timezone_aware() -> None:
    letter = dead_letter_record(stage="encode", source=SOURCE, error=EmptyText("x"))
    assert isinstance(letter.failed_at, datetime) and letter.failed_at.tzinfo is not None


@pytest.mark.parametrize("fmt", wire.WIRE_FORMATS)
def test_a_dead_lettered_chunk_re_drives_in_its_own_wire_format(fmt: wire.WireFormat) -> None:
    chunk = factories.pcm_chunk(factories.request(), 0, 1, samples=480)
    record = wire.encode(chunk, fmt)
    source = SourceRecord("tts.pcm", 0, 7, chunk.request_id.encode(), record.value, tuple(record.headers))
    letter = dead_letter_record(stage="encode", source=source, error=TimeoutError("slow"), tenant="acme")
    back = DeadLetter.from_record(letter.key, letter.payload, letter.headers())
    # What `replay dlq` sends back: the value and the record's own headers, plus replay headers.
    redriven = [*back.original_headers, *replay_headers("dlq:tts.encode.dlq/0@3", stage="encode")]
    assert back.payload == record.value
    assert wire.is_binary(redriven) == (fmt == "cloudevents")
    assert wire.decode(PcmChunk, back.payload, redriven) == chunk
