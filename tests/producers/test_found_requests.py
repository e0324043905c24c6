"""Replay's reading of tts.requests: streamed utterances assembled from their records, in
partition order, with the segment stage's rules (records after the end and other tenants'
deltas ignored, the text bounded)."""

from __future__ import annotations

from types import SimpleNamespace

from streamtts.producers.replay.found_requests import RequestsFound, UtteranceLimits
from streamtts.runtime.pipeline_settings import TextSettings
from streamtts.schemas import TextDelta, TTSRequest
from streamtts.schemas.utterance import MAX_DELTA_CHARS, StreamOptions

LIMITS = UtteranceLimits.of(TextSettings())  # the segment stage's defaults: 20,000 characters, idle 30 s


def _record(contract: TTSRequest | TextDelta, *, cloudevent: bool = False, at_ms: int = 0) -> SimpleNamespace:
    kind = "text_delta" if isinstance(contract, TextDelta) else "request"
    headers = [("ce_type", f"dev.streamtts.{kind}.v1".encode())] if cloudevent else []
    return SimpleNamespace(
        key=contract.request_id.encode(), value=contract.to_bytes(), headers=headers, timestamp=at_ms
    )


def test_an_utterance_is_its_opening_text_and_its_deltas_until_the_end() -> None:
    opener = TTSRequest.new("Hello ", stream=StreamOptions(), tenant="acme")
    rid = opener.request_id
    reader = RequestsFound(LIMITS, {rid})
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
    reader = RequestsFound(LIMITS)
    assert reader.take(_record(whole)) is reader.found[whole.request_id]
    assert reader.take(_record(TextDelta(request_id="opened-earlier", delta="words"))) is None
    assert reader.orphan_deltas == 1
    reader.take(_record(silent))
    reader.take(_record(TextDelta(request_id=silent.request_id, delta="  ", end=True)))
    assert reader.found[silent.request_id].request is None  # it said nothing: nothing to replay
    reader.take(SimpleNamespace(key=b"x", value=b"{not json", headers=[]))
    assert reader.invalid == 1


def test_an_utterance_past_the_stage_limits_stops_before_the_delta_that_passes_them() -> None:
    """The segment stage ends an utterance at its own text limit (20,000 by default, not the
    contract's 200,000) and delta count: a replay says no more than it did."""
    opener = TTSRequest.new("", stream=StreamOptions())
    rid = opener.request_id
    reader = RequestsFound(LIMITS, {rid})
    reader.take(_record(opener))
    piece = "a" * (MAX_DELTA_CHARS - 1) + " "
    n = LIMITS.max_chars // len(piece)
    for _ in range(n):
        reader.take(_record(TextDelta(request_id=rid, delta=piece)))
    assert not reader.found[rid].ended
    reader.take(_record(TextDelta(request_id=rid, delta=piece)))
    entry = reader.found[rid]
    assert entry.ended and entry.truncated and len(entry.text) == n * len(piece) <= 20_000
    few = RequestsFound(UtteranceLimits(max_chars=1000, max_deltas=2, idle_ms=30_000), {rid})
    few.take(_record(opener))
    for word in ("one ", "two ", "three "):
        few.take(_record(TextDelta(request_id=rid, delta=word)))
    assert few.found[rid].text == "one two " and few.found[rid].truncated


def test_an_utterance_whose_writer_went_silent_ends_there() -> None:
    """Past `stream_idle_s` without a delta the stage ended it: a later delta is not its."""
    opener = TTSRequest.new("", stream=StreamOptions())
    rid = opener.request_id
    reader = RequestsFound(LIMITS, {rid})
    reader.take(_record(opener, at_ms=1_000))
    reader.take(_record(TextDelta(request_id=rid, delta="Still there? "), at_ms=2_000))
    assert reader.expired(31_999) == [] and reader.unfinished == {rid}
    late = reader.take(_record(TextDelta(request_id=rid, delta="Hello again."), at_ms=40_000))
    assert late is reader.found[rid]  # it ended, silent since 2 s: the late delta is not taken
    assert reader.found[rid].request is not None and reader.found[rid].request.text == "Still there? "
    assert reader.unfinished == set()


def test_the_longest_silent_utterances_end_first_and_the_others_stay_open() -> None:
    first, second = TTSRequest.new("", stream=StreamOptions()), TTSRequest.new("", stream=StreamOptions())
    reader = RequestsFound(LIMITS)
    reader.take(_record(first, at_ms=1_000))
    reader.take(_record(second, at_ms=1_500))
    reader.take(_record(TextDelta(request_id=first.request_id, delta="Hi. "), at_ms=2_000))
    reader.take(_record(TextDelta(request_id=second.request_id, delta="Yes. "), at_ms=20_000))
    assert reader.expired(33_000) == [reader.found[first.request_id]]
    assert reader.unfinished == {second.request_id}
    assert reader.expired(60_000, all_open=True) == [reader.found[second.request_id]]
    assert reader.unfinished == set()
