"""Tenant lexicons applied by the segmenter: aliases, given pronunciations, case and word
boundaries, languages, and refusals that name the entry."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from streamtts.features.lexicons.files import LexiconFileError, read_entries
from streamtts.processors.segment.exceptions import ExpandedTooLong
from streamtts.processors.segment.lexicon import LexiconError, LexiconMatcher, check_lexicon
from streamtts.processors.segment.planner import plan_segments
from streamtts.processors.segment.span_limits import SpanLimits
from streamtts.schemas import ContractError, Lexicon, LexiconEntry, TTSRequest

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _lexicon(*entries: dict, version: int = 1) -> Lexicon:
    return Lexicon.from_obj(
        {"tenant": "acme", "version": version, "entries": list(entries), "updated_at": NOW.isoformat()}
    )


def _plan(text: str, lexicon: Lexicon | None, **fields: object) -> list:
    matcher = LexiconMatcher(lexicon) if lexicon else None
    request = TTSRequest.new(text, tenant="acme", **fields)
    return plan_segments(
        request, limits=SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=20_000), lexicon=matcher
    )


LEX = _lexicon(
    {"grapheme": "Zorvex", "alias": "Acme Corporation", "language": "en"},
    {"grapheme": "招行", "phonemes": "zhao1 hang2", "alphabet": "pinyin", "language": "zh"},
    {"grapheme": "GIF", "phonemes": "dʒɪf", "language": "en", "case_sensitive": True},
    {"grapheme": "SQL", "alias": "sequel"},
    version=7,
)


def test_alias_replaces_whole_words_in_any_case_and_the_version_is_recorded() -> None:
    segs = _plan("Zorvex and ZORVEX call, zorvexes do not.", LEX)
    assert segs[0].text == "Acme Corporation and Acme Corporation call, zorvexes do not."
    assert segs[0].request.lexicon_version == 7


def test_entries_apply_inside_other_languages_text_by_the_language_they_are_read_in() -> None:
    segs = _plan("请联系Zorvex客服，或者去招行办理SQL查询。", LEX)
    text = " ".join(s.text for s in segs)
    assert "Acme Corporation" in text and "sequel" in text  # en entry in a zh sentence: en run
    given = [(r.text, r.lang) for s in segs for r in s.runs or [] if r.phonemes]
    assert given == [("招行", "zh")]


def test_case_sensitive_entry_and_language_filter() -> None:
    segs = _plan("A GIF, not a gif.", LEX)
    runs = segs[0].runs or []
    assert [(r.text, r.phonemes) for r in runs if r.phonemes] == [("GIF", "dʒɪf")]
    ja = _plan(
        "招行に行きます。",
        _lexicon({"grapheme": "招行", "alias": "しょうこう", "language": "zh"}),
        language="ja",
    )
    assert "招行" in ja[0].text  # a zh entry does not touch Japanese text


def test_longest_match_wins_and_a_cjk_grapheme_needs_no_spaces() -> None:
    lex = _lexicon({"grapheme": "招商", "alias": "招商局"}, {"grapheme": "招商银行", "alias": "招行"})
    assert _plan("我在招商银行工作。", lex)[0].text == "我在招行工作。"


def test_timestamps_show_the_written_word_for_an_alias() -> None:
    text = "Ask Zorvex today."
    seg = _plan(text, LEX, timestamps=True)[0]
    assert seg.source_text == text
    # The alias' characters map to the grapheme they replace.
    from streamtts.schemas.segment import text_map_range

    start = seg.text.index("Acme")
    a, b = text_map_range(seg.text_map or [], start, start + len("Acme Corporation"))
    assert text[a:b] == "Zorvex"


def test_another_tenant_or_no_lexicon_is_unaffected() -> None:
    assert _plan("Zorvex.", None)[0].text == "Zorvex."
    assert _plan("Zorvex.", None)[0].request.lexicon_version is None


def test_forged_placeholders_in_request_text_are_blanked() -> None:
    forged = "Say \U00100000 now."
    assert _plan(forged, LEX)[0].text == "Say now."


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"grapheme": "X"}, "exactly one of alias or phonemes"),
        ({"grapheme": "X", "alias": "a", "phonemes": "b"}, "exactly one of alias or phonemes"),
        ({"grapheme": "招行", "phonemes": "zhao9", "alphabet": "pinyin", "language": "zh"}, "pinyin"),
        ({"grapheme": "X", "phonemes": "zh1", "alphabet": "pinyin", "language": "en"}, "for language zh"),
        ({"grapheme": "X", "phonemes": "hɛ1lo"}, "not IPA"),
        ({"grapheme": "x" * 101, "alias": "a"}, "at most 100"),
    ],
)
def test_bad_entries_are_refused_naming_the_field(entry: dict, message: str) -> None:
    with pytest.raises(ContractError) as err:
        _lexicon(entry)
    assert message in str(err.value)


def test_pinyin_that_does_not_exist_is_refused_naming_the_entry() -> None:
    lex = _lexicon(
        {"grapheme": "好", "alias": "hao"},
        {"grapheme": "招行", "phonemes": "xqz1", "alphabet": "pinyin", "language": "zh"},
    )
    with pytest.raises(LexiconError, match=r"entry 1 \('招行'\)"):
        check_lexicon(lex)


def test_duplicate_entries_are_refused() -> None:
    with pytest.raises(ContractError, match="repeats entry 0"):
        _lexicon({"grapheme": "Zorvex", "alias": "a"}, {"grapheme": "zorvex", "alias": "b"})


def test_files_in_json_yaml_and_csv_read_alike(tmp_path) -> None:  # type: ignore[no-untyped-def]
    json_file = tmp_path / "lex.json"
    json_file.write_text(
        '{"entries": [{"grapheme": "Zorvex", "alias": "Acme Corporation", "language": "en"},'
        ' {"grapheme": "招行", "phonemes": "zhao1 hang2", "alphabet": "pinyin", "language": "zh"}]}',
        "utf-8",
    )
    yaml_file = tmp_path / "lex.yaml"
    yaml_file.write_text(
        "entries:\n  - {grapheme: Zorvex, alias: Acme Corporation, language: en}\n"
        "  - {grapheme: 招行, phonemes: zhao1 hang2, alphabet: pinyin, language: zh}\n",
        "utf-8",
    )
    csv_file = tmp_path / "lex.csv"
    csv_file.write_text(
        "grapheme,alias,phonemes,alphabet,language\nZorvex,Acme Corporation,,,en\n招行,,zhao1 hang2,pinyin,zh\n",
        "utf-8",
    )
    read = [read_entries(p) for p in (json_file, yaml_file, csv_file)]
    assert read[0] == read[1] == read[2]
    assert read[0][1].phonemes == "zhao1 hang2"


def test_a_bad_file_names_the_entry_and_nothing_is_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.csv"
    bad.write_text("grapheme,alias,phonemes\nok,fine,\nZorvex,,\n", "utf-8")
    with pytest.raises(LexiconFileError, match=r"entry 1 \('Zorvex'\): .*exactly one of alias or phonemes"):
        read_entries(bad)
    with pytest.raises(LexiconFileError, match="not JSON"):
        (tmp_path / "x.json").write_text("{", "utf-8")
        read_entries(tmp_path / "x.json")


def test_a_given_pronunciation_beside_a_script_no_voice_speaks() -> None:
    """The given run keeps its own language: Tibetan text (no row of the language table) stays
    a span of its own (as without the lexicon), and IPA for a Cyrillic word is spoken as English."""
    zorvex = _lexicon({"grapheme": "Zorvex", "phonemes": "zɔrvɛks"})
    segs = _plan("Zorvex བཀྲ་ཤིས་བདེ་ལེགས.", zorvex)
    assert [(s.text, s.lang) for s in segs] == [("Zorvex", "en"), ("བཀྲ་ཤིས་བདེ་ལེགས.", "other")]
    moscow = _lexicon({"grapheme": "Москва", "phonemes": "mɐskva"})
    segs = _plan("Я еду в Москва сегодня.", moscow)
    given = [(r.text.strip(), r.lang) for s in segs for r in s.runs or [] if r.phonemes]
    assert given == [("Москва", "en")]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"grapheme": "ACME", "alias": "\n\n"}, "alias is blank"),
        ({"grapheme": "ACME", "alias": "<speak>x</speak>"}, "markup"),
        ({"grapheme": "AC\U00100000ME", "alias": "x"}, "private-use"),
    ],
)
def test_aliases_and_graphemes_are_plain_text(entry: dict, message: str) -> None:
    with pytest.raises(ContractError, match=message):
        _lexicon(entry)


def test_request_text_cannot_forge_the_segmenters_code_marks() -> None:
    # U+E000/U+E001 keep a code whole (no clause cut): user text holding them is blanked.
    segs = _plan("价格\ue000一百元，好的，谢谢您的耐心等待\ue001。", None)
    assert all("\ue000" not in s.text and "\ue001" not in s.text for s in segs)
    assert _plan("0000\ue000\ue001", None)[-1].ends_sentence


# 499 characters for "q": refused by the contract now (an alias says at most 50 for one
# character), so built unvalidated: the spoken budget must hold on its own all the same.
HUGE_ALIAS = Lexicon.model_construct(
    tenant="acme",
    version=1,
    entries=[LexiconEntry.model_construct(grapheme="q", alias=("word " * 100).strip(), phonemes=None)],
    updated_at=NOW,
)


def test_what_an_alias_says_counts_against_the_request_and_stops_its_expansion() -> None:
    # Issue #30: "q "*1000 said 498,485 characters in 2,515 segments (487 s of planning):
    # the limit was checked only on the text as written.
    started = time.process_time()
    with pytest.raises(ExpandedTooLong) as err:
        _plan("q " * 1000, HUGE_ALIAS)
    assert err.value.reason == "expanded_too_long"
    assert "21000 characters" in str(err.value) and "2000 characters" in str(err.value)
    assert time.process_time() - started < 1.0  # refused as it grows, not after


def test_a_short_request_may_still_use_a_long_alias() -> None:
    segs = _plan("Say q and q.", HUGE_ALIAS)
    assert sum(s.text.count("word") for s in segs) == 200
