"""What a listener heard after a barge-in (pure: no sockets, no Kafka)."""

from __future__ import annotations

from datetime import UTC, datetime

from streamtts.gateway.delivery import Delivery, heard_ms, words_heard
from streamtts.gateway.request_state import RequestState
from streamtts.gateway.ws_outbound import Outbound
from streamtts.schemas import AudioChunk, CompletionResult, WordTiming
from streamtts.sinks.result_builder import as_heard

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _word(text: str, start: float, end: float, at: int) -> WordTiming:
    return WordTiming(text=text, start_ms=start, end_ms=end, char_start=at, char_end=at + len(text))


def _chunk(seq: int, offset: float, words: list[WordTiming]) -> AudioChunk:
    return AudioChunk(
        request_id="r1",
        tenant="acme",
        seq=seq,
        total=2,
        last=seq == 1,
        format="pcm",
        sample_rate=8000,
        audio=b"\x00\x00" * 4000,
        duration_ms=500.0,
        offset_ms=offset,
        words=words,
        created_at=NOW,
        encoded_at=NOW,
    )


def test_heard_is_what_was_written_or_the_clients_position_if_less() -> None:
    a, b = Delivery("r1"), Delivery("r1")
    a.wrote(400.0)
    b.wrote(260.0)
    assert heard_ms([a, b], None) == 400.0
    assert heard_ms([a, b], 300.0) == 300.0
    assert heard_ms([], 300.0) is None


def test_words_heard_are_those_whose_audio_began() -> None:
    chunks = [
        _chunk(0, 0.0, [_word("Hello", 10, 300, 0), _word("there", 320, 490, 6)]),
        _chunk(1, 500.0, [_word("friend", 520, 900, 12)]),
    ]
    assert [w.text for w in words_heard(chunks, 320.0) or []] == ["Hello"]
    assert [w.text for w in words_heard(chunks, 521.0) or []] == ["Hello", "there", "friend"]


def test_stopping_a_request_stops_every_live_delivery_once() -> None:
    state = RequestState("r1", "acme", "pcm", expects_result=False)
    calls: list[str] = []
    live = state.deliver(Delivery("r1", on_stop=lambda: calls.append("stop")))
    done = state.deliver(Delivery("r1"))
    done.wrote(900.0)
    done.ended = True  # a stream that ended by itself is not cut
    live.wrote(240.0)
    assert state.stop_deliveries(200.0) == 200.0 and live.stopped and calls == ["stop"]
    assert state.stop_deliveries(None) is None and calls == ["stop"]  # nothing left to stop
    late = state.deliver(Delivery("r1"))
    assert late.stopped  # a stream opened after the cancel gets nothing


def test_a_completed_result_is_corrected_to_what_was_heard() -> None:
    words = [_word("Hello", 10, 300, 0), _word("there", 320, 490, 6)]
    result = CompletionResult(
        request_id="r1",
        tenant="acme",
        status="completed",
        format="pcm",
        sample_rate=8000,
        duration_ms=1000.0,
        chunks=2,
        words=words,
        created_at=NOW,
        completed_at=NOW,
    )
    fixed = as_heard(result, 300.0)
    assert fixed is not None and fixed.status == "cancelled" and fixed.spoken_ms == 300.0
    assert [w.text for w in fixed.words_spoken or []] == ["Hello"]
    assert as_heard(result, 1000.0) is None  # all of it was heard
    assert as_heard(fixed, 300.0) is None  # already says so


def test_first_and_last_audio_are_told_once_each_when_the_chunks_arrive_in_order() -> None:
    # The gateway's first- and last-audio spans hang on these: the last is the chunk that
    # completes the request in order, even when it arrived before its predecessor.
    told: list[str] = []
    state = RequestState("r1", "acme", "pcm", expects_result=False)
    state.on_first_chunk = lambda: told.append("first")
    state.on_last_chunk = lambda: told.append("last")
    state.add_chunk(_chunk(1, 500.0, []))  # the last chunk overtook the first: held
    assert told == ["first"] and not state.streamed
    state.add_chunk(_chunk(0, 0.0, []))
    assert told == ["first", "last"] and state.streamed
    state.add_chunk(_chunk(1, 500.0, []))  # redelivered
    assert told == ["first", "last"]


def test_a_request_written_whole_but_played_in_part_is_heard_to_the_play_position() -> None:
    state = RequestState("r1", "acme", "mulaw", expects_result=False)
    delivery = state.deliver(Delivery("r1"))
    delivery.wrote(2000.0)
    delivery.ended = True  # fast pacing: all written, the bridge still plays it
    assert state.heard_until(2000.0) is False  # played to its end: heard whole, nothing changes
    assert state.heard_ms is None
    assert state.heard_until(300.0) is True
    assert state.heard_ms == 300.0
    assert state.heard_until(500.0) is False  # a later, larger position cannot add to it


def test_the_session_knows_which_written_replies_the_client_still_plays() -> None:
    out = Outbound(ws=None, queue_frames=8, send_timeout_s=1.0)  # type: ignore[arg-type]
    out.starts_ms["r1"] = 1000.0
    written = Delivery("r1")
    written.wrote(2000.0)
    written.ended = True
    assert out.plays_past(written, 2500.0)  # it ends at 3000 on the session clock
    assert not out.plays_past(written, 3000.0)
    assert not out.plays_past(written, None)  # no position from the client: all heard
    assert not out.plays_past(Delivery("r1"), 1200.0)  # still being written: a live cut
    assert out.heard_of(written, 1300.0) == 300.0
    assert out.heard_of(written, 900.0) == 0.0
    assert out.heard_of(Delivery("never-written"), 5000.0) == 0.0
