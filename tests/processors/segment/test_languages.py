"""The language table (`schemas.languages`): every row has eval sentences and a G2P that loads,
short sentences are identified, and a script nobody speaks is a clear error."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from streamtts.processors.segment.exceptions import SegmentationError
from streamtts.processors.segment.langid import identify, normalize_lang_hint
from streamtts.processors.segment.segmenter import segment_text
from streamtts.schemas import ContractError, TTSRequest
from streamtts.schemas.languages import BY_TAG, FORMANT_TAGS, NEURAL_TAGS, ROWS, TAGS

_EVAL = [
    json.loads(line)
    for line in (resources.files("streamtts.bench") / "workloads" / "eval_sentences.jsonl")
    .read_text("utf-8")
    .splitlines()
    if line.strip()
]


def test_the_table_is_coherent() -> None:
    assert len(TAGS) == len(set(TAGS)) >= 50
    assert {"es", "it", "pt", "de", "fr", "hi"} <= NEURAL_TAGS
    for row in ROWS:
        assert row.sample.strip(), row.tag
        assert (row.voice == "espeak") == (row.tier == "formant"), row.tag
        assert row.numbers == "context" or row.tag not in ("zh", "en", "ja"), row.tag


@pytest.mark.parametrize("tag", ["es", "it", "pt", "de", "fr", "hi"])
def test_every_new_neural_language_has_customer_service_eval_sentences(tag: str) -> None:
    sentences = [s["text"] for s in _EVAL if s["lang"] == tag]
    assert len(sentences) >= 3
    assert sum(any(c.isdigit() for c in s) for s in sentences) >= 2  # numbers, prices, dates


@pytest.mark.parametrize("tag", sorted(NEURAL_TAGS - {"zh", "yue", "en", "ja"}))
def test_every_espeak_g2p_loads_and_phonemizes(tag: str) -> None:
    from streamtts.processors.synthesize.g2p import G2PBank

    phonemes = G2PBank().phonemize(BY_TAG[tag].sample, tag)
    assert len(phonemes) > 10


SINGLE_SENTENCES = {
    "en": ["Your order has shipped and will arrive on Monday.", "Thank you for calling, how can I help?"],
    "es": ["Su pedido número 4521 llegará el lunes.", "Gracias por su paciencia, un momento por favor."],
    "it": ["Il suo ordine è stato spedito ieri.", "Grazie per la pazienza, resti in linea."],
    "pt": ["O seu pedido foi enviado hoje de manhã.", "Obrigado pela paciência, aguarde um momento."],
    "de": ["Ihre Bestellung wird am Freitag geliefert.", "Vielen Dank für Ihre Geduld, einen Moment bitte."],
    "fr": [
        "Votre commande sera livrée mardi prochain.",
        "Merci de votre patience, un instant s'il vous plaît.",
    ],
    "nl": ["Uw bestelling wordt morgen bezorgd.", "Bedankt voor uw geduld, een ogenblik alstublieft."],
    "pl": ["Twoje zamówienie zostało wysłane wczoraj.", "Dziękujemy za cierpliwość, proszę chwilę poczekać."],
    "tr": ["Siparişiniz yarın teslim edilecek.", "Sabrınız için teşekkür ederiz, lütfen bekleyin."],
    "ru": ["Ваш заказ будет доставлен завтра.", "Спасибо за ваше терпение, подождите минуту."],
    "hi": ["आपका ऑर्डर कल भेज दिया गया है।", "धैर्य के लिए धन्यवाद, कृपया प्रतीक्षा करें।"],
}


@pytest.mark.parametrize(("tag", "sentence"), [(t, s) for t, ss in SINGLE_SENTENCES.items() for s in ss])
def test_single_sentences_are_identified(tag: str, sentence: str) -> None:
    spans = segment_text(sentence)
    assert {s.lang for s in spans} == {tag}


def test_languages_lingua_splits_count_together() -> None:
    """lingua splits a Croatian greeting between hr (0.6) and bs (0.4): neither alone was sure,
    so it was spoken as English; together they are."""
    assert {s.lang for s in segment_text("Dobar dan, kako vam mogu pomoći?")} <= {"hr", "bs"}
    assert {s.lang for s in segment_text("Dobrý den, jak vám mohu pomoci?")} == {"cs"}
    assert {s.lang for s in segment_text("Thank you for calling, how can I help you?")} == {"en"}


def test_the_requests_language_wins_and_a_mixed_sentence_stays_one_speaker() -> None:
    assert {s.lang for s in segment_text("Il suo ordine è stato spedito ieri.", lang_hint="es")} == {"es"}
    spans = segment_text("Puede descargar la app Microsoft Teams desde nuestra página web.")
    assert {s.lang for s in spans} == {"es"} and all(len(s.runs) == 1 for s in spans)
    spans = segment_text("请在App里打开您的account设置。")  # Latin inside CJK: English, as before
    assert spans[0].langs == {"zh", "en"}
    assert normalize_lang_hint("pt-BR") == "pt" and normalize_lang_hint("es-MX") == "es"


def test_short_or_unsure_text_keeps_the_default() -> None:
    assert identify("Hello.", "latin", "en") == "en"
    assert identify("iPhone 15 Pro", "latin", "en") == "en"
    assert identify("Your verification code is 382915, valid for 5 minutes.", "latin", "en") == "en"


def test_a_script_nobody_speaks_is_a_clear_error() -> None:
    with pytest.raises(SegmentationError, match="no voice speaks") as err:
        segment_text("བཀྲ་ཤིས་བདེ་ལེགས།")
    assert err.value.reason == "unsupported_language"


def test_the_contract_takes_the_tables_tags() -> None:
    assert TTSRequest.new("Dzień dobry.", language="pl").language == "pl"
    with pytest.raises(ContractError):
        TTSRequest.new("Hello.", language="xx")
    assert FORMANT_TAGS and not FORMANT_TAGS & NEURAL_TAGS


def test_tiers_follow_the_measured_errors() -> None:
    """The shipped measurements decide the tier of every espeak-phonemized Kokoro language."""
    from streamtts.schemas.languages import load_measurements, measured_tier

    measured = load_measurements()
    assert {"es", "it", "pt", "de", "fr", "hi"} <= set(measured), "every new neural language is measured"
    for tag, m in measured.items():
        row = BY_TAG[tag]
        assert row.error == round(m["error"], 3)
        if row.g2p == "espeak" and tag not in ("ko", "yue"):
            assert row.tier == measured_tier(m["error"]), tag
    assert measured_tier(0.10) == "neural" and measured_tier(0.101) == "neural-accented"


def test_eval_writes_and_merges_measurements(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from streamtts.bench.speech_eval import LangRow, write_measurements

    path = tmp_path / "errors.json"
    path.write_text(json.dumps({"languages": {"it": {"error": 0.5, "system": "core"}}}), "utf-8")

    def row(lang: str, rate: dict[str, float]) -> LangRow:
        return LangRow(lang, 3, rate, {}, {}, {})

    rows = [row("es", {"raw": 0.0, "core": 0.05, "pipeline": 0.02}), row("de", {"raw": 0.1, "core": 0.3})]
    rows += [row("mixed", {"pipeline": 0.1}), row("all", {"pipeline": 0.1})]
    written = write_measurements(path, rows, today="2026-12-03")
    assert set(written) == {"es", "de"}
    doc = json.loads(path.read_text("utf-8"))["languages"]
    assert doc["es"] == {
        "error": 0.02,
        "system": "pipeline",
        "sentences": 3,
        "voice": "jm_kumo",
        "measured_at": "2026-12-03",
    }
    assert doc["de"]["system"] == "core" and doc["de"]["error"] == 0.3
    assert doc["it"]["error"] == 0.5, "a language not in this run keeps its measurement"
