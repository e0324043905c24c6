"""Free-form request values that could break a header, a label, a key or a loop are refused
at the contract, naming the field — before any stage spends work on them."""

from __future__ import annotations

import orjson
import pytest

from streamtts.schemas import ContractError, PcmChunk
from tests.factories import pcm_chunk, request


@pytest.mark.parametrize(
    "voice",
    [
        "jm_kumo:0.7\n+jf_alpha:0.3",  # a newline: once broke the S3 metadata header
        "jm_kumo\r\nX-Injected: 1",
        "jm_kumo:0.7 + jf_alpha:0.3",
        "jm_kumo\x00",
        "声优",
        "-leading-dash",
        "+".join(["jm_kumo:0.1"] * 9),  # more than 8 blend terms
        "jm_kumo:0.7+",
        "x" * 65,
    ],
)
def test_hostile_voices_are_refused_naming_the_field(voice: str) -> None:
    with pytest.raises(ContractError) as caught:
        request("hello", voice=voice)
    assert caught.value.field == "voice"


@pytest.mark.parametrize(
    "voice", ["auto", "jm_kumo", "en_joe", "jm_kumo:0.7+jf_gongitsune:0.3", "my.voice-2"]
)
def test_real_voices_pass(voice: str) -> None:
    assert request("hello", voice=voice).voice == voice


@pytest.mark.parametrize(("field", "value"), [("total", 10**12), ("part", 1_000), ("seq", -1)])
def test_chunk_counters_are_bounded(field: str, value: int) -> None:
    good = orjson.loads(pcm_chunk(request(), 0, 2).to_bytes())
    good[field] = value
    if field == "total":
        good["seq"] = 0
    with pytest.raises(ContractError) as caught:
        PcmChunk.from_obj(good)
    assert caught.value.field == field
