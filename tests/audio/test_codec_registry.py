"""The codec registry is the one place a format is declared: a codec registered here (in the
test only) is offered by `streamtts synth --format`, the request contract, the gateway's
OpenAPI document and the OpenAI-compatible endpoint, with no other edit; every registered
codec round-trips through its real encoder and decoder."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import pytest

from streamtts.audio import formats
from streamtts.audio.codecs import assemble, decode_audio, encode_chunk
from streamtts.audio.formats import AudioCodec
from streamtts.audio.pcm import to_int16
from streamtts.cli.main import build_parser, main
from streamtts.gateway.app import create_app
from streamtts.gateway.openapi import openapi_document
from streamtts.gateway.service import Gateway
from streamtts.gateway.settings import GatewaySettings
from streamtts.processors.encode.stage import encode_pcm_chunk
from streamtts.runtime.settings import KafkaSettings, S3Settings, Settings
from streamtts.schemas import ContractError, PcmChunk, RequestContext, TTSRequest
from streamtts.schemas.jsonschema_export import schema_for

SR = 24_000


# -- a format the code base has never heard of: signed 8-bit PCM ------------------------------


def _s8_encode(samples: np.ndarray, sample_rate: int, *, serial: int | None = None, codec: str = "") -> bytes:
    return (to_int16(samples) >> 8).astype(np.int8).tobytes()


def _s8_file(samples: np.ndarray, sample_rate: int, *, codec: str = "") -> bytes:
    return _s8_encode(samples, sample_rate)


def _s8_decode(data: bytes, sample_rate: int | None) -> tuple[np.ndarray, int]:
    assert sample_rate, "headerless"
    return np.frombuffer(data, dtype=np.int8).astype(np.float32) / 128.0, sample_rate


S8 = AudioCodec(
    name="s8",
    content_type="audio/x-s8",
    extension=".s8",
    concatenable=True,
    encode_chunk=_s8_encode,
    encode_file=_s8_file,
    decode=_s8_decode,
    openai_name="s8",
    sample_width=1,
    silence=b"\x00",
)


@pytest.fixture
def s8() -> Iterator[AudioCodec]:
    formats.register(S8)
    try:
        yield S8
    finally:
        formats.unregister(S8.name)


def _enums(doc: dict) -> dict[str, list[str]]:
    schemas = doc["components"]["schemas"]
    return {
        "speech": schemas["SpeechRequest"]["properties"]["format"]["enum"],
        "status": schemas["Status"]["properties"]["format"]["enum"],
        "openai": schemas["OpenAISpeechRequest"]["properties"]["response_format"]["enum"],
    }


# -- offered everywhere once registered --------------------------------------------------------


def test_synth_offers_a_registered_format(s8: AudioCodec, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["synth", "--format", "s8", "--text", "hi", "--out", "speech.wav"])
    assert args.format == "s8"
    with pytest.raises(SystemExit) as done:
        main(["synth", "--help"])
    assert done.value.code == 0
    assert ",alaw,s8}" in capsys.readouterr().out  # the argparse choices, in registry order


def test_synth_does_not_offer_an_unregistered_format(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["synth", "--format", "s8", "--out", "speech.s8"])
    assert done.value.code == 2
    assert "invalid choice: 's8'" in capsys.readouterr().err


def test_the_contract_accepts_exactly_the_registered_formats(s8: AudioCodec) -> None:
    request = TTSRequest.new("Hello.", format="s8")
    assert TTSRequest.from_bytes(request.to_bytes()).format == "s8"
    assert "s8" in schema_for("request")["properties"]["format"]["enum"]
    formats.unregister("s8")
    with pytest.raises(ContractError) as err:
        TTSRequest.from_bytes(request.to_bytes())
    assert err.value.reason == "literal_error"
    assert "s8" not in schema_for("request")["properties"]["format"]["enum"]


def test_the_openapi_document_offers_a_registered_format(s8: AudioCodec) -> None:
    doc = openapi_document(GatewaySettings(), ["en_joe"])
    for where, enum in _enums(doc).items():
        assert "s8" in enum, where
    audio = doc["paths"]["/v1/audio/speech"]["post"]["responses"]["200"]["content"]
    assert "audio/x-s8" in audio
    # Framed telephony streams: any headerless fixed-width format.
    frame_ms = doc["paths"]["/v1/speech/{request_id}/audio"]["get"]["parameters"][1]
    assert "s8" in frame_ms["description"]


def test_the_openapi_document_lists_only_registered_formats() -> None:
    enums = _enums(openapi_document(GatewaySettings(), ["en_joe"]))
    assert enums["speech"] == enums["status"] == list(formats.names())
    assert enums["openai"] == ["wav", "pcm", "mp3", "opus", "flac"]  # G.711 is not OpenAI's


def test_the_openapi_request_id_is_the_contracts() -> None:
    doc = openapi_document(GatewaySettings(), ["en_joe"])
    param = doc["paths"]["/v1/speech/{request_id}"]["get"]["parameters"][0]
    assert param["schema"]["pattern"] == TTSRequest.model_json_schema()["properties"]["request_id"]["pattern"]


class _LoopbackProducer:
    """Stands in for Kafka: every submitted request is encoded by the encode stage's own
    function and its one chunk handed to the gateway's fan-out, as the audio topic would."""

    def __init__(self, gw: Gateway) -> None:
        self.gw = gw
        self.requests: list[TTSRequest] = []

    async def submit(self, request: TTSRequest, **kwargs: object) -> None:  # trace=: the gateway's
        self.requests.append(request)
        pcm = PcmChunk(
            request_id=request.request_id,
            seq=0,
            total=1,
            last=True,
            lang="en",
            voice_used="en_joe",
            sample_rate=request.sample_rate,
            pcm=(np.sin(np.arange(SR // 10) / 5) * 8000).astype("<i2").tobytes(),
            request=RequestContext.of(request),
            synthesized_at=datetime.now(UTC),
        )
        state = self.gw.fanout.get(request.request_id)
        assert state is not None
        asyncio.get_running_loop().call_soon(state.add_chunk, encode_pcm_chunk(pcm))


async def _openai_speech(response_format: str) -> tuple[httpx.Response, list[TTSRequest]]:
    settings = GatewaySettings(api_keys={"key-acme": "acme"})
    pipeline = Settings(kafka=KafkaSettings(), s3=S3Settings())  # never connected: no lifespan
    gw = Gateway.build(settings, pipeline)
    producer = _LoopbackProducer(gw)
    gw.producer = producer  # type: ignore[assignment]
    app = create_app(settings, pipeline, gateway=gw)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        response = await client.post(
            "/v1/audio/speech",
            json={"model": "tts-1", "input": "Hello.", "voice": "alloy", "response_format": response_format},
            headers={"Authorization": "Bearer key-acme"},
        )
    return response, producer.requests


async def test_the_openai_endpoint_serves_a_registered_format(s8: AudioCodec) -> None:
    response, requests = await _openai_speech("s8")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/x-s8"
    assert 'filename="' + requests[0].request_id + '.s8"' in response.headers["content-disposition"]
    assert [r.format for r in requests] == ["s8"]
    samples, rate = decode_audio(response.content, "s8", sample_rate=requests[0].sample_rate)
    assert rate == SR and len(samples) == SR // 10  # one byte a sample, all of it streamed


async def test_the_openai_endpoint_refuses_an_unregistered_format() -> None:
    response, requests = await _openai_speech("s8")
    assert response.status_code == 400 and response.json()["error"]["code"] == "unsupported_format"
    assert "mp3" in response.json()["error"]["message"] and not requests


# -- every registered codec round-trips ---------------------------------------------------------


def _tone(seconds: float, sr: int) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (0.3 * np.sin(2 * np.pi * 220 * t) * np.hanning(len(t))).astype(np.float32)


@pytest.fixture(params=[*formats.names(), "s8"])
def codec(request: pytest.FixtureRequest) -> Iterator[AudioCodec]:
    if request.param == "s8":
        formats.register(S8)
        try:
            yield S8
        finally:
            formats.unregister("s8")
    else:
        yield formats.get(request.param)


@pytest.mark.parametrize("sr", [8_000, SR])
def test_every_codec_round_trips_a_file_with_its_length_and_rate(codec: AudioCodec, sr: int) -> None:
    x = _tone(0.7, sr)
    y, rate = codec.decode(codec.encode_file(x, sr, codec="pcm_s16le"), sr)
    # Compressed formats may decode at their own rate (Opus: 48 kHz); the duration is the same.
    assert rate == sr or (not codec.sample_width and rate == 48_000)
    assert abs(len(y) / rate - 0.7) <= 0.005
    rms = [float(np.sqrt(np.mean(np.square(a, dtype=np.float64)))) for a in (x, y)]
    assert abs(rms[1] / rms[0] - 1) < 0.25  # the tone's energy, not silence or noise


def test_every_codec_assembles_its_chunks_into_one_decodable_file(codec: AudioCodec) -> None:
    parts = [_tone(s, SR) for s in (0.3, 0.5)]
    payloads = [encode_chunk(p, SR, codec.name, serial=i + 1) for i, p in enumerate(parts)]
    whole = assemble([payloads[0], b"", payloads[1]], codec.name)  # b"": a cancel marker
    if codec.concatenable:
        assert whole == b"".join(payloads)
    y, rate = decode_audio(whole, codec.name, sample_rate=SR)
    # mp3 chunks carry no gapless info: each adds the encoder delay and padding (<= 70 ms).
    assert 0 <= len(y) / rate - 0.8 <= 0.15


def test_a_name_is_registered_once() -> None:
    with pytest.raises(ValueError, match="already registered"):
        formats.register(formats.get("mp3"))


def test_a_format_that_cannot_be_joined_must_say_how_to_assemble() -> None:
    with pytest.raises(ValueError, match="assemble"):
        AudioCodec(
            name="x",
            content_type="audio/x",
            extension=".x",
            concatenable=False,
            encode_chunk=_s8_encode,
            encode_file=_s8_file,
            decode=_s8_decode,
        )


def test_synth_picks_a_format_from_the_file_extension(tmp_path: Path) -> None:
    from streamtts.cli.synth_cmd import _pick_format

    args = build_parser().parse_args(["synth", "--out", str(tmp_path / "x.wav")])
    for name, fmt in [("a.ogg", "opus"), ("a.ulaw", "mulaw"), ("a.ul", "mulaw"), ("a.al", "alaw"),
                      ("a.raw", "pcm"), ("a.mp3", "mp3"), ("a.txt", "wav"), ("a", "wav")]:  # fmt: skip
        args.out = tmp_path / name
        assert _pick_format(args) == fmt, name
