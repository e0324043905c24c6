"""Contracts: round trips, strict rejections with named fields, JSON Schema agreement."""

from __future__ import annotations

from datetime import UTC, datetime

import jsonschema
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtts.schemas import (
    CONTRACTS,
    AudioChunk,
    AuditEvent,
    CanaryReport,
    CompletionResult,
    ContractError,
    ControlMessage,
    FilePart,
    Lexicon,
    LexiconEntry,
    LoadReport,
    PcmChunk,
    ReleaseConfig,
    RequestContext,
    Segment,
    TextDelta,
    TTSRequest,
)
from streamtts.schemas.jsonschema_export import SCHEMA_DIR, render

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _request(**kw: object) -> TTSRequest:
    return TTSRequest.new("Hello world.", request_id="req-1", created_at=NOW, **kw)


def _segment(seq: int = 0, total: int = 2) -> Segment:
    r = _request()
    return Segment(
        request_id=r.request_id,
        seq=seq,
        total=total,
        last=seq == total - 1,
        text="Hello",
        lang="en",
        request=RequestContext.of(r),
        segmented_at=NOW,
    )


def test_request_round_trip_is_lossless() -> None:
    r = _request(voice="jm_kumo:0.7+jf_gongitsune:0.3", format="opus", metadata={"call": "42"})
    assert TTSRequest.from_bytes(r.to_bytes()) == r


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(min_size=1, max_size=300).filter(
        lambda s: s.encode("utf-8", "surrogatepass") and not any(0xD800 <= ord(c) <= 0xDFFF for c in s)
    ),
    speed=st.floats(min_value=0.5, max_value=2.0, allow_nan=False),
    rate=st.integers(min_value=8000, max_value=48000),
    fmt=st.sampled_from(["wav", "pcm", "mp3", "opus", "flac"]),
    meta=st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=5),
)
def test_any_valid_request_round_trips(
    text: str, speed: float, rate: int, fmt: str, meta: dict[str, str]
) -> None:
    r = TTSRequest.new(text, speed=speed, sample_rate=rate, format=fmt, metadata=meta, created_at=NOW)
    again = TTSRequest.from_bytes(r.to_bytes())
    assert again == r
    assert again.text == text


@pytest.mark.parametrize(
    ("payload", "field", "reason"),
    [
        (b"not json", "", "invalid_json"),
        (b"\xff\xfe{}", "", "invalid_utf8"),
        (b"[1, 2]", "", "not_an_object"),
        (
            b'{"schema_version": 2, "request_id": "a", "text": "x", "created_at": "2026-01-01T00:00:00Z"}',
            "schema_version",
            "unsupported_version",
        ),
        (b'{"request_id": "a", "created_at": "2026-01-01T00:00:00Z"}', "text", "missing"),
        (
            b'{"request_id": "a", "text": "x", "created_at": "2026-01-01T00:00:00Z", "colour": 1}',
            "colour",
            "extra_forbidden",
        ),
        (
            b'{"request_id": "a", "text": "x", "created_at": "2026-01-01T00:00:00Z", "format": "ogg"}',
            "format",
            "literal_error",
        ),
        (
            b'{"request_id": "a b", "text": "x", "created_at": "2026-01-01T00:00:00Z"}',
            "request_id",
            "string_pattern_mismatch",
        ),
        (
            b'{"request_id": "a", "text": "", "created_at": "2026-01-01T00:00:00Z"}',
            "text",
            "string_too_short",
        ),
        (
            b'{"request_id": "a", "text": "x", "created_at": "2026-01-01T00:00:00"}',
            "created_at",
            "timezone_aware",
        ),
        (
            b'{"request_id": "a", "text": "x", "created_at": "2026-01-01T00:00:00Z", "speed": 3}',
            "speed",
            "less_than_equal",
        ),
        (
            b'{"request_id": "a", "text": "x", "created_at": "2026-01-01T00:00:00Z", "delivery": {"chunks": false, "storage": false}}',
            "delivery",
            "value_error",
        ),
        (b"null", "", "not_an_object"),
    ],
)
def test_request_rejections_name_the_field(payload: bytes, field: str, reason: str) -> None:
    with pytest.raises(ContractError) as info:
        TTSRequest.from_bytes(payload)
    assert info.value.field == field
    assert info.value.reason == reason
    if field:
        assert f"'{field}'" in str(info.value)


def test_tombstone_is_rejected() -> None:
    with pytest.raises(ContractError, match="tombstone"):
        TTSRequest.from_bytes(None)


def test_segment_sequence_invariants() -> None:
    assert Segment.from_bytes(_segment(1, 2).to_bytes()).last is True
    bad = orjson.loads(_segment(0, 2).to_bytes())
    bad["last"] = True
    with pytest.raises(ContractError, match="last must be true exactly"):
        Segment.from_obj(bad)
    bad["seq"], bad["last"] = 5, False
    with pytest.raises(ContractError, match="below total"):
        Segment.from_obj(bad)


def test_pcm_chunk_carries_binary_audio_as_base64() -> None:
    seg = _segment(1, 2)
    pcm = bytes(range(256)) * 4
    chunk = PcmChunk(
        request_id="req-1",
        seq=1,
        total=2,
        last=True,
        lang="en",
        voice_used="jm_kumo",
        sample_rate=24000,
        pcm=pcm,
        request=seg.request,
        synthesized_at=NOW,
    )
    wire = orjson.loads(chunk.to_bytes())
    assert isinstance(wire["pcm"], str)
    back = PcmChunk.from_bytes(chunk.to_bytes())
    assert back.pcm == pcm
    assert back.duration_ms == pytest.approx(len(pcm) / 2 / 24000 * 1000)
    wire["pcm"] = "###"
    with pytest.raises(ContractError) as info:
        PcmChunk.from_obj(wire)
    assert info.value.field == "pcm"


def test_odd_pcm_length_rejected() -> None:
    seg = _segment(1, 2)
    with pytest.raises(ValueError, match="whole 16-bit samples"):
        PcmChunk(
            request_id="req-1",
            seq=1,
            total=2,
            last=True,
            lang="en",
            voice_used="v",
            sample_rate=24000,
            pcm=b"abc",
            request=seg.request,
            synthesized_at=NOW,
        )


def _examples() -> dict[str, bytes]:
    seg = _segment(1, 2)
    return {
        "request": _request().to_bytes(),
        "text_delta": TextDelta(request_id="req-1", delta=" world,", flush=True).to_bytes(),
        "segment": seg.to_bytes(),
        "pcm_chunk": PcmChunk(
            request_id="req-1",
            seq=1,
            total=2,
            last=True,
            lang="en",
            voice_used="v",
            sample_rate=24000,
            pcm=b"\x00\x01",
            request=seg.request,
            synthesized_at=NOW,
        ).to_bytes(),
        "file_part": FilePart(
            request_id="req-1",
            seq=0,
            total=1,
            last=True,
            lang="en",
            voice_used="v",
            sample_rate=24000,
            carries="frames",
            audio=b"\xff\xf3",
            sample_count=576,
            stream="alone",
            request=seg.request,
            synthesized_at=NOW,
        ).to_bytes(),
        "audio_chunk": AudioChunk(
            request_id="req-1",
            tenant="default",
            seq=0,
            total=1,
            last=True,
            format="mp3",
            sample_rate=24000,
            audio=b"\xff\xfb",
            duration_ms=26.1,
            created_at=NOW,
            encoded_at=NOW,
        ).to_bytes(),
        "result": CompletionResult(
            request_id="req-1",
            tenant="default",
            status="completed",
            format="mp3",
            sample_rate=24000,
            duration_ms=1000,
            chunks=2,
            created_at=NOW,
            completed_at=NOW,
        ).to_bytes(),
        "control": ControlMessage(request_id="req-1", tenant="default", at=NOW, played_ms=1200.0).to_bytes(),
        "lexicon": Lexicon(
            tenant="acme",
            version=2,
            entries=[
                LexiconEntry(grapheme="Zorvex", alias="Acme Corporation", language="en"),
                LexiconEntry(grapheme="招行", phonemes="zhao1 hang2", alphabet="pinyin", language="zh"),
            ],
            updated_at=NOW,
        ).to_bytes(),
        "audit": AuditEvent(
            event_id="e1",
            at=NOW,
            source="gateway",
            action="audio_read",
            outcome="ok",
            tenant="default",
            key_id="sha256:0123456789ab",
            client="2001:db8::1",
            request_id="req-1",
            status=200,
            bytes=4096,
            duration_ms=12.5,
        ).to_bytes(),
        "canary_report": CanaryReport(
            release="joe-v2", worker="node-1-4242", ok=False, reason="duration 1.2 s, expected 1.9 s", at=NOW
        ).to_bytes(),
        "release": ReleaseConfig(
            version=3, candidate="joe-v2", state="canary", percent=10, tenants=["acme"], updated_at=NOW
        ).to_bytes(),
        "load_report": LoadReport.from_obj(
            {
                "worker": "node-1:4242",
                "release": "stable",
                "partitions": {"tts.segments": [0, 3], "tts.segments.long": [0, 3]},
                "first_wait_ms": 812.5,
                "queued_first": 2,
                "queued_bulk": 7,
                "slots": 2,
                "cost": {
                    "kokoro": {
                        "intercept_ms": 60,
                        "ms_per_phoneme": 9.1,
                        "phonemes_per_char": 1.1,
                        "runs": 40,
                    }
                },
                "interval_s": 1.0,
                "at": NOW,
            }
        ).to_bytes(),
    }


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_checked_in_json_schema_matches_the_python_contract(name: str) -> None:
    path = SCHEMA_DIR / f"{name}.v1.json"
    assert path.read_bytes() == render(name), "run `python -m streamtts.schemas.jsonschema_export`"


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_json_schema_accepts_valid_and_rejects_what_python_rejects(name: str) -> None:
    schema = orjson.loads((SCHEMA_DIR / f"{name}.v1.json").read_bytes())
    validator = jsonschema.Draft202012Validator(schema)
    payload = orjson.loads(_examples()[name])
    validator.validate(payload)  # what Python produced, a non-Python consumer accepts
    payload["unexpected_field"] = 1
    assert not validator.is_valid(payload)
    with pytest.raises(ContractError):
        CONTRACTS[name].from_obj(payload)


@pytest.mark.parametrize("version", [2**63, 2**64, 10**30])
def test_a_release_version_past_64_bits_is_refused_in_python_and_in_the_json_schema(version: int) -> None:
    """Writers increment `version`; one past what a 64-bit consumer (or orjson) can carry
    would make every later rule unwritable: refused where it is read."""
    record = orjson.loads(_examples()["release"])
    validator = jsonschema.Draft202012Validator(orjson.loads((SCHEMA_DIR / "release.v1.json").read_bytes()))
    record["version"] = 2**63 - 1
    validator.validate(record)
    assert ReleaseConfig.from_obj(record).version == 2**63 - 1
    record["version"] = version
    assert not validator.is_valid(record)
    with pytest.raises(ContractError) as refused:
        ReleaseConfig.from_obj(record)
    assert refused.value.field == "version"
    with pytest.raises(ContractError):
        ReleaseConfig.from_bytes(
            _examples()["release"].replace(b'"version":3', f'"version":{version}'.encode())
        )
