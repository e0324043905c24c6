"""Replay's reading of tts.requests: streamed utterances assembled from their records, in
partition order, with the segment stage's rules (records after the end and other tenants'
deltas ignored, the text bounded)."""

from __future__ import annotations

from types import SimpleNamespace

from streamtts.producers.replay.found_requests import RequestsFound
from streamtts.schemas import TextDelta, TTSRequest
from streamtts.schemas.request import MAX_TEXT_CHARS
from streamtts.schemas.utterance import MAX_DELTA_CHARS, StreamOptions


def _record(contract: TTSRequest | TextDelta, *, cloudevent: bool = False) -> SimpleNamespace:
    kind = "text_delta" if isinstance(contract, TextDelta) else "request"
    headers = [("ce_type", f"dev.streamtts.{kind}.v1".encode())] if cloudevent else []
    return SimpleNamespace(key=contract.request_id.encode(), value=contract.to_bytes(), headers=headers)


def test_an_utterance_is_its_opening_text_and_its_deltas_until_the_end() -> None:
    opener = TTSRequest.new("Hello ", stream=StreamOptions(), tenant="acme")
    rid = opener.request_id
    reader = RequestsFound({rid})
    assert reader.take(_record(opener)) is None  # open: nothing to replay yet
    assert (
        reader.take(_record(TextDelta(request_id=rid, tenant="acme", delta="there, "), cloudevent=True))
        is None
    )
    assert reader.take(_record(TextDelta(request_id=rid, tenant="other", delta="NOT THEIRS "))) is None
    assert reader.take(_record(TextDelta(request_id=rid, tenant="acme", flush=True))) is None
    done = reader.take(_record(TextDelta(request_id=rid, tenant="acme", delta="friend.", end=True)))
    assert done is not None and done.ended
    reader.take(_record(TextDelta(request_id=rid, tenant="acme", delta=" After the end.")))
    reader.take(_record(opener))  # a redelivered opener starts nothing again
    request = reader.found[rid].request
    assert request is not None and request.text == "Hello there, friend." and request.stream is None
    assert request.request_id == rid and request.tenant == "acme"


def test_whole_requests_deltas_without_an_opener_and_empty_utterances() -> None:
    whole = TTSRequest.new("Just this.")
    silent = TTSRequest.new("", stream=StreamOptions())
    reader = RequestsFound()
    assert reader.take(_record(whole)) is reader.found[whole.request_id]
    assert reader.take(_record(TextDelta(request_id="opened-earlier", delta="words"))) is None
    assert reader.orphan_deltas == 1
    reader.take(_record(silent))
    reader.take(_record(TextDelta(request_id=silent.request_id, delta="  ", end=True)))
    assert reader.found[silent.request_id].request is None  # it said nothing: nothing to replay
    reader.take(SimpleNamespace(key=b"x", value=b"{not json", headers=[]))
    assert reader.invalid == 1


def test_an_utterance_past_the_text_limit_stops_before_the_delta_that_passes_it() -> None:
    opener = TTSRequest.new("", stream=StreamOptions())
    rid = opener.request_id
    reader = RequestsFound({rid})
    reader.take(_record(opener))
    piece = "a" * (MAX_DELTA_CHARS - 1) + " "
    n = MAX_TEXT_CHARS // len(piece)
    for _ in range(n):
        reader.take(_record(TextDelta(request_id=rid, delta=piece)))
    assert not reader.found[rid].ended
    reader.take(_record(TextDelta(request_id=rid, delta=piece)))
    entry = reader.found[rid]
    assert entry.ended and entry.truncated and len(entry.text) == n * len(piece) <= MAX_TEXT_CHARS
