"""Caption files from word timestamps, read back by real parsers."""

from __future__ import annotations

import io

import orjson
import webvtt

from streamtts.schemas import WordTiming
from streamtts.schemas.captions import cues, render, retimed, to_srt, to_vtt

TEXT = "Hello world, this is a test. 您好，<世界>！"


def _words() -> list[WordTiming]:
    spans = [
        ("Hello", 0, 400),
        ("world", 420, 800),
        ("this", 1000, 1200),
        ("is", 1200, 1300),
        ("a", 1300, 1350),
        ("test", 1350, 1700),
        ("您好", 2100, 2500),
        ("世界", 2700, 3100),
    ]
    out, at = [], 0
    for i, (text, start, end) in enumerate(spans):
        pos = TEXT.index(text, at)
        nxt = TEXT.index(spans[i + 1][0], pos + len(text)) if i + 1 < len(spans) else len(TEXT)
        out.append(
            WordTiming(
                text=text,
                start_ms=start,
                end_ms=end,
                char_start=pos,
                char_end=pos + len(text),
                trailing=TEXT[pos + len(text) : nxt],
            )
        )
        at = pos + len(text)
    return out


def test_vtt_parses_with_webvtt_py_and_reads_as_written() -> None:
    words = _words()
    vtt = to_vtt(words)
    parsed = webvtt.from_string(vtt, strict=True)
    texts = [c.raw_text for c in parsed]
    # One cue per sentence, the request's own punctuation; "<" and ">" escaped for WebVTT.
    assert texts == ["Hello world, this is a test.", "您好，&lt;世界&gt;！"]
    assert parsed[0].start == "00:00:00.000" and parsed[0].end == "00:00:01.700"
    assert (parsed[1].start, parsed[1].end) == ("00:00:02.100", "00:00:03.100")


def test_srt_parses_and_json_round_trips() -> None:
    words = _words()
    srt = to_srt(words)
    parsed = webvtt.from_buffer(io.StringIO(srt), format="srt")
    assert [(c.start, c.end) for c in parsed] == [
        ("00:00:00.000", "00:00:01.700"),
        ("00:00:02.100", "00:00:03.100"),
    ]
    assert [c.raw_text for c in parsed] == ["Hello world, this is a test.", "您好，<世界>！"]
    back = [WordTiming(**w) for w in orjson.loads(render(words, "json"))]
    assert back == words


def test_long_runs_break_into_readable_cues() -> None:
    words = [
        WordTiming(
            text="word",
            start_ms=i * 300,
            end_ms=i * 300 + 250,
            char_start=i * 5,
            char_end=i * 5 + 4,
            trailing=" ",
        )
        for i in range(30)
    ]
    found = cues(words)
    assert len(found) > 3 and all(len(c.text) <= 42 for c in found)
    assert found[0].start_ms == 0 and found[-1].end_ms == words[-1].end_ms


def test_retimed_places_chunks_by_the_audio_actually_received() -> None:
    # The second chunk claims offset 0 (a worker that could not recover the timeline):
    # its words keep their place inside it, after the first chunk's 1000 ms.
    a = WordTiming(text="a", start_ms=100, end_ms=300, char_start=0, char_end=1)
    b = WordTiming(text="b", start_ms=50, end_ms=250, char_start=2, char_end=3)
    out = retimed([(1000.0, 0.0, [a]), (800.0, 0.0, [b])])
    assert [(w.start_ms, w.end_ms) for w in out] == [(100, 300), (1050, 1250)]


def test_words_split_across_spans_keep_their_space_and_are_one_word() -> None:
    # "connect your": the span ended after "connect", so its trailing is empty; the request
    # had a space there (a gap no trailing holds).
    text = "we connect your call about 123 apples"
    a = WordTiming(text="connect", start_ms=0, end_ms=300, char_start=3, char_end=10, trailing="")
    b = WordTiming(text="your", start_ms=400, end_ms=600, char_start=11, char_end=15, trailing=" ")
    assert cues([a, b])[0].text == "connect your"
    # "123" read out across a span break ("one" | "hundred twenty-three"): one word.
    first = WordTiming(text="123", start_ms=100, end_ms=300, char_start=27, char_end=30, trailing="")
    second = WordTiming(text="123", start_ms=20, end_ms=500, char_start=27, char_end=30, trailing=" ")
    out = retimed([(400.0, 0.0, [first]), (600.0, 0.0, [second])])
    assert len(out) == 1 and (out[0].start_ms, out[0].end_ms) == (100, 900) and out[0].trailing == " "
    assert text[out[0].char_start : out[0].char_end] == "123"


def _timed(text: str, spans: list[tuple[str, float, float]]) -> list[WordTiming]:
    out, at = [], 0
    for i, (word, start, end) in enumerate(spans):
        pos = text.index(word, at)
        nxt = text.index(spans[i + 1][0], pos + len(word)) if i + 1 < len(spans) else len(text)
        trailing = text[pos + len(word) : nxt]
        out.append(
            WordTiming(
                text=word,
                start_ms=start,
                end_ms=end,
                char_start=pos,
                char_end=pos + len(word),
                trailing=trailing,
            )
        )
        at = pos + len(word)
    return out


def test_a_carriage_return_in_the_request_never_ends_a_caption_line() -> None:
    """CR (alone or in CRLF) ends a line in SRT and WebVTT, like LF: a request's "\\r" inside
    a cue would cut it, or (doubled) end the cue and start a malformed one."""
    text = "Hello\rworld\r\rthere\u2028friend, again. More\r\ntext."
    words = _timed(
        text,
        [
            ("Hello", 0, 300),
            ("world", 300, 600),
            ("there", 600, 900),
            ("friend", 900, 1200),
            ("again", 1200, 1500),
            ("More", 1600, 1800),
            ("text", 1800, 2000),
        ],
    )
    for rendered in (to_vtt(words), to_srt(words)):
        assert "\r" not in rendered and "\u2028" not in rendered
    # A line feed in the request ends a cue (as before); CR and U+2028 are spaces in one.
    expected = ["Hello world there friend, again.", "More", "text."]
    vtt = webvtt.from_string(to_vtt(words), strict=True)
    assert [c.raw_text for c in vtt] == expected
    srt = webvtt.from_buffer(io.StringIO(to_srt(words)), format="srt")
    assert [c.raw_text for c in srt] == expected
