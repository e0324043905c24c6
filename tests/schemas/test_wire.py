"""The wire module: both formats round-trip every field, binary mode is valid CloudEvents 1.0
(checked with the `cloudevents` SDK's own Kafka binding, not only our reader), headers stay
bounded, and the dual reader tells the formats apart by `content-type`."""

from __future__ import annotations

from datetime import UTC, datetime

import jsonschema
import orjson
import pytest
from cloudevents.core.bindings.kafka import KafkaMessage, from_binary
from cloudevents.core.formats.json import JSONFormat

from streamtts.schemas import (
    CONTRACTS,
    AudioChunk,
    CompletionResult,
    ContractError,
    ControlMessage,
    Degradation,
    PcmChunk,
    WordTiming,
    wire,
)
from streamtts.schemas.chunks import MarkTiming
from streamtts.schemas.jsonschema_export import SCHEMA_DIR, render_headers
from tests import factories


def _pcm(**kw: object) -> PcmChunk:
    req = factories.request(timestamps=True)
    base = factories.pcm_chunk(req, 0, 2, samples=2400)
    return base.model_copy(update=kw)


def _audio(pcm: PcmChunk, **kw: object) -> AudioChunk:
    ctx = pcm.request
    fields: dict[str, object] = dict(
        request_id=pcm.request_id,
        tenant=ctx.tenant,
        seq=pcm.seq,
        total=pcm.total,
        last=pcm.last,
        format="mp3",
        sample_rate=pcm.sample_rate,
        audio=b"\xff\xfb" + bytes(300),
        duration_ms=pcm.duration_ms,
        metadata={"a": "b"},
        created_at=ctx.created_at,
        encoded_at=datetime.now(UTC),
    )
    fields.update(kw)
    return AudioChunk(**fields)  # type: ignore[arg-type]


WORDS = [WordTiming(text="Hello", start_ms=0, end_ms=310.5, char_start=0, char_end=5, trailing=", ")]
RICH = dict(
    words=WORDS,
    marks=[MarkTiming(name="m1", time_ms=12.5)],
    offset_ms=1000.25,
    cache="miss",
    synth_ms=55.5,
    degradation=Degradation(
        seq=0, step="fallback_voice", reason="g2p_timeout", lang="en", voice_requested="x"
    ),
)


@pytest.mark.parametrize("fmt", wire.WIRE_FORMATS)
def test_pcm_chunks_round_trip_in_both_formats(fmt: wire.WireFormat) -> None:
    chunk = _pcm(**RICH)
    record = wire.encode(chunk, fmt)
    assert record.wire_format == fmt
    assert wire.decode(PcmChunk, record.value, record.headers) == chunk


@pytest.mark.parametrize("fmt", wire.WIRE_FORMATS)
def test_audio_chunks_round_trip_in_both_formats(fmt: wire.WireFormat) -> None:
    chunk = _audio(_pcm(), words=WORDS, release="canary", lexicon_version=3, cancelled=False)
    record = wire.encode(chunk, fmt, content_type="audio/mpeg")
    assert wire.decode(AudioChunk, record.value, record.headers) == chunk


def test_binary_mode_value_is_the_audio_itself() -> None:
    pcm = _pcm()
    record = wire.encode(pcm, "cloudevents")
    assert record.value == pcm.pcm
    headers = dict(record.headers)
    assert headers["content-type"] == b"audio/L16;rate=24000;endianness=little-endian"  # mono: the default
    # Each fact once: the rate and channels only in the content type, the id only as subject.
    assert "ce_samplerate" not in headers and "ce_channels" not in headers
    assert headers["ce_subject"] == pcm.request_id.encode()
    assert b"request_id" not in headers["ce_request"]
    audio = _audio(pcm)
    assert wire.encode(audio, "cloudevents", content_type="audio/mpeg").value == audio.audio
    # ~25 % fewer bytes than base64 inside JSON, headers included.
    assert wire.encode(pcm, "cloudevents").size < 0.8 * wire.encode(pcm, "v1").size


def _sdk(record: wire.Record) -> object:
    return from_binary(KafkaMessage(headers=dict(record.headers), key=b"k", value=record.value), JSONFormat())


def test_every_record_type_is_valid_cloudevents_for_the_sdk() -> None:
    pcm = _pcm(**RICH)
    req = factories.request()
    records = {
        "pcm_chunk": wire.encode(pcm, "cloudevents"),
        "audio_chunk": wire.encode(_audio(pcm), "cloudevents", content_type="audio/ogg; codecs=opus"),
        "tts_request": wire.encode(req, "cloudevents"),
        "segment": wire.encode(factories.segment(req), "cloudevents"),
        "control": wire.encode(
            ControlMessage(request_id=req.request_id, tenant=req.tenant, at=datetime.now(UTC)),
            "cloudevents",
        ),
    }
    for name, record in records.items():
        event = _sdk(record)
        assert event.get_specversion() == "1.0", name  # type: ignore[attr-defined]
        assert event.get_type().startswith("dev.streamtts."), name  # type: ignore[attr-defined]
        assert event.get_id() and event.get_source().startswith("/streamtts"), name  # type: ignore[attr-defined]
        assert event.get_time() is not None, name  # type: ignore[attr-defined]
    pcm_event = _sdk(records["pcm_chunk"])
    assert "rate=24000" in pcm_event.get_datacontenttype()  # type: ignore[attr-defined]
    assert pcm_event.get_subject() == pcm.request_id  # type: ignore[attr-defined]
    assert pcm_event.get_datacontenttype().startswith("audio/L16")  # type: ignore[attr-defined]


def test_json_records_keep_their_body_and_gain_headers() -> None:
    req = factories.request()
    record = wire.encode(req, "cloudevents")
    assert record.value == req.to_bytes()
    assert dict(record.headers)["content-type"] == b"application/json"
    assert wire.decode(type(req), record.value, record.headers) == req
    assert wire.encode(req, "v1").headers == []


def test_oversized_headers_fall_back_to_v1_losslessly() -> None:
    words = [
        WordTiming(text="w" * 1000, start_ms=i, end_ms=i + 1, char_start=0, char_end=1000) for i in range(80)
    ]
    chunk = _pcm(words=words)
    record = wire.encode(chunk, "cloudevents")
    assert record.wire_format == "v1" and record.headers == []
    assert wire.decode(PcmChunk, record.value, record.headers) == chunk


def test_bad_binary_records_are_contract_errors_naming_the_header() -> None:
    record = wire.encode(_pcm(), "cloudevents")
    headers = dict(record.headers)
    with pytest.raises(ContractError, match="ce_type"):
        wire.decode(PcmChunk, record.value, {**headers, "ce_type": b"dev.streamtts.pcm_chunk.v2"})
    with pytest.raises(ContractError, match="ce_seq"):
        wire.decode(PcmChunk, record.value, {**headers, "ce_seq": b"{"})
    with pytest.raises(ContractError, match="seq"):
        wire.decode(PcmChunk, record.value, {k: v for k, v in headers.items() if k != "ce_seq"})
    with pytest.raises(ContractError, match="even"):
        wire.decode(PcmChunk, record.value + b"\x00", headers)
    # A JSON contract is its JSON whatever the headers say (a foreign writer's text/plain).
    with pytest.raises(ContractError, match="not valid JSON"):
        wire.decode(CompletionResult, b"\x00", {"content-type": b"audio/mpeg"})
    req = factories.request()
    assert wire.decode(type(req), req.to_bytes(), {"content-type": b"text/plain"}) == req


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_header_schemas_are_checked_in(name: str) -> None:
    path = SCHEMA_DIR / f"{name}.headers.v1.json"
    assert path.read_bytes() == render_headers(name), "run `python -m streamtts.schemas.jsonschema_export`"


def _validate_headers(name: str, record: wire.Record) -> None:
    schema = orjson.loads((SCHEMA_DIR / f"{name}.headers.v1.json").read_bytes())
    headers = {k: v.decode() for k, v in record.headers}
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(headers)
    for header, prop in schema["properties"].items():
        if "contentSchema" in prop and header in headers:  # JSON-valued extensions: their content too
            content = {**prop["contentSchema"], "$defs": schema.get("$defs", {})}
            jsonschema.Draft202012Validator(content).validate(orjson.loads(headers[header]))


def test_written_headers_validate_against_their_schemas() -> None:
    pcm = _pcm(**RICH)
    req = factories.request()
    _validate_headers("pcm_chunk", wire.encode(pcm, "cloudevents"))
    _validate_headers(
        "audio_chunk", wire.encode(_audio(pcm, words=WORDS), "cloudevents", content_type="audio/mpeg")
    )
    _validate_headers("request", wire.encode(req, "cloudevents"))
    _validate_headers("segment", wire.encode(factories.segment(req), "cloudevents"))
    bad = wire.encode(pcm, "cloudevents")
    with pytest.raises(jsonschema.ValidationError):
        _validate_headers(
            "pcm_chunk", wire.Record(bad.value, [h for h in bad.headers if h[0] != "ce_seq"], "cloudevents")
        )


def test_pcm_with_the_first_builds_redundant_headers_still_reads() -> None:
    """The first cloudevents builds also wrote ce_samplerate, ce_channels and the request id
    inside ce_request: this reader takes such records (and the ones without them)."""
    pcm = _pcm(**RICH)
    record = wire.encode(pcm, "cloudevents")
    headers = dict(record.headers)
    assert "ce_samplerate" not in headers and "ce_channels" not in headers
    assert wire.decode(PcmChunk, record.value, record.headers) == pcm
    request = orjson.loads(headers["ce_request"])
    request["request_id"] = pcm.request_id
    headers["ce_request"] = orjson.dumps(request)
    headers["ce_samplerate"] = b"24000"
    headers["ce_channels"] = b"1"
    headers["content-type"] = b"audio/L16;rate=24000;channels=1;endianness=little-endian"
    assert wire.decode(PcmChunk, record.value, list(headers.items())) == pcm
    headers["ce_channels"] = b"2"
    with pytest.raises(ContractError) as err:
        wire.decode(PcmChunk, record.value, list(headers.items()))
    assert err.value.reason == "unsupported_channels"


def test_pcm_request_context_at_its_defaults_may_be_left_out() -> None:
    """Every PCM record repeats its request's context. This release still writes all of it
    (readers of the previous one require it) and reads records that leave the fields at the
    request's defaults out, as the next release will write them: restored, nothing lost."""
    pcm = _pcm(**RICH)
    full = orjson.loads(dict(wire.encode(pcm, "cloudevents").headers)["ce_request"])
    assert set(wire.CONTEXT_DEFAULTED) <= set(full)  # what a previous-release reader needs

    record = wire.encode(pcm, "cloudevents", compact_context=True)
    written = orjson.loads(dict(record.headers)["ce_request"])
    assert {"tenant", "created_at", "timestamps"} <= set(written)
    assert not set(written) & set(wire.CONTEXT_DEFAULTED)
    assert wire.decode(PcmChunk, record.value, record.headers) == pcm
    _validate_headers("pcm_chunk", record)

    custom = factories.pcm_chunk(
        factories.request(
            language="es",
            voice="jm_kumo",
            format="opus",
            speed=1.25,
            priority="interactive",
            delivery={"reply_topic": "tts.reply.x"},
        ),
        0,
        1,
    )
    record = wire.encode(custom, "cloudevents", compact_context=True)
    written = orjson.loads(dict(record.headers)["ce_request"])
    assert written["language"] == "es" and written["voice"] == "jm_kumo" and written["format"] == "opus"
    assert written["speed"] == 1.25 and written["priority"] == "interactive"
    assert written["delivery"] == {"reply_topic": "tts.reply.x"}
    assert wire.decode(PcmChunk, record.value, record.headers) == custom
    _validate_headers("pcm_chunk", record)


@pytest.mark.parametrize(
    ("content_type", "reason"),
    [
        (b"audio/L16;channels=1;endianness=little-endian", "invalid_header"),
        (b"audio/L16;rate=24000;channels=2;endianness=little-endian", "unsupported_channels"),
        (b"audio/L16;rate=24000;channels=1;endianness=big-endian", "unsupported_encoding"),
    ],
)
def test_pcm_content_type_must_say_a_mono_little_endian_rate(content_type: bytes, reason: str) -> None:
    record = wire.encode(_pcm(), "cloudevents")
    headers = [(k, content_type if k == "content-type" else v) for k, v in record.headers]
    with pytest.raises(ContractError) as err:
        wire.decode(PcmChunk, record.value, headers)
    assert err.value.reason == reason


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_every_contract_is_valid_cloudevents_for_the_sdk_and_its_header_schema(name: str) -> None:
    from tests.schemas.test_contracts import _examples

    contract = CONTRACTS[name].from_bytes(_examples()[name])
    record = wire.encode(contract, "cloudevents", content_type="audio/mpeg")
    event = _sdk(record)
    assert event.get_specversion() == "1.0"  # type: ignore[attr-defined]
    assert event.get_type() == f"dev.streamtts.{name}.v1"  # type: ignore[attr-defined]
    assert event.get_id() and event.get_source().startswith("/streamtts")  # type: ignore[attr-defined]
    _validate_headers(name, record)
    assert wire.decode(CONTRACTS[name], record.value, record.headers) == contract
