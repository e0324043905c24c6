"""The languages the product speaks, as data: one row per language (a BCP-47 tag).

Each row names how its text becomes phonemes (`g2p`), who reads its numbers (`numbers`), the
sentence punctuation the splitter must know, the voice `auto` picks, and its quality tier:

- ``neural``: a Kokoro voice speaks it; Whisper-base error ≤ 0.10 through the pipeline;
- ``neural-accented``: a Kokoro voice speaks it with an accent (error ≤ 0.20, or a language
  the product already spoke before the table existed, kept as it was: ko, yue);
- ``formant``: espeak-ng's own formant synthesizer speaks it (robotic but intelligible).

`error` is the measured Whisper-base character error of the row's voice (see
docs/languages.md for how and when it was measured); None where nothing was measured.
Adding a language is one row here plus its eval sentences (neural rows, in
`bench/workloads/eval_sentences.jsonl`) or its `sample` (formant rows).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, Literal

Tier = Literal["neural", "neural-accented", "formant"]
G2PKind = Literal["misaki-zh", "espeak-en", "openjtalk", "espeak"]
NumberReader = Literal["context", "espeak"]

FORMANT_VOICE = "espeak"
"""The voice id of espeak-ng's formant synthesizer (speaks every row with an espeak voice)."""


@dataclass(frozen=True)
class LanguageRow:
    tag: str
    """BCP-47 tag, as requests, segments and metrics carry it."""
    name: str
    script: str
    """latin, cyrillic, devanagari, han, kana, hangul, greek, arabic, hebrew, ... (what the
    segmenter sees first; text identification decides among the rows of one script)."""
    g2p: G2PKind
    """misaki-zh (jieba + pypinyin), espeak-en (misaki's EspeakFallback), openjtalk (Japanese),
    or espeak (misaki's EspeakG2P on `espeak` for the neural voice; espeak-ng itself for
    the formant voice)."""
    espeak: str
    """The espeak-ng voice of the language (the formant synthesizer's, and the G2P's where
    `g2p` is espeak)."""
    tier: Tier
    voice: str
    """The voice `auto` picks for a sentence in this language."""
    numbers: NumberReader = "espeak"
    """context: the pipeline reads numbers itself (codes digit by digit, ranges, units, see
    `processors.segment.numbers`); espeak: digits stay digits and espeak-ng reads them."""
    sentence_end: str = ""
    """Sentence-final punctuation beyond . ! ? (and the CJK ones the splitter knows)."""
    lingua: str | None = None
    """The language's name in `lingua-language-detector` (None: not identified from text;
    spoken only when the request names it or its script is its own)."""
    error: float | None = None
    """Measured Whisper-base character (en: word) error of `voice` (None: not measured)."""
    sample: str = ""
    """A short customer-service sentence (formant rows: what the tests speak)."""

    @property
    def neural(self) -> bool:
        return self.tier != "formant"


def _f(
    tag: str,
    name: str,
    script: str,
    sample: str,
    espeak: str = "",
    lingua: str | None = None,
    sentence_end: str = "",
) -> LanguageRow:
    """A formant row: espeak-ng phonemizes, reads the numbers and speaks."""
    return LanguageRow(
        tag,
        name,
        script,
        "espeak",
        espeak or tag,
        "formant",
        FORMANT_VOICE,
        sentence_end=sentence_end,
        lingua=lingua,
        sample=sample,
    )


ROWS: tuple[LanguageRow, ...] = (
    # -- neural: the shipped Kokoro-82M v1.0 model (trained on en es fr hi it ja pt zh) ----------
    LanguageRow(
        "zh",
        "Chinese (Mandarin)",
        "han",
        "misaki-zh",
        "cmn",
        "neural",
        "jm_kumo",
        "context",
        lingua="CHINESE",
        error=0.237,
        sample="您好，请问有什么可以帮您？",
    ),
    LanguageRow(
        "en",
        "English (US)",
        "latin",
        "espeak-en",
        "en-us",
        "neural",
        "en_joe",
        "context",
        lingua="ENGLISH",
        error=0.060,
        sample="Hello, how can I help you today?",
    ),
    LanguageRow(
        "ja",
        "Japanese",
        "kana",
        "openjtalk",
        "ja",
        "neural",
        "jf_alpha",
        "context",
        lingua="JAPANESE",
        error=0.055,
        sample="お電話ありがとうございます。",
    ),
    LanguageRow(
        "ko",
        "Korean",
        "hangul",
        "espeak",
        "ko",
        "neural-accented",
        "jm_kumo",
        "context",
        lingua="KOREAN",
        error=0.280,
        sample="안녕하세요, 무엇을 도와드릴까요?",
    ),
    LanguageRow(
        "yue",
        "Cantonese (as Mandarin)",
        "han",
        "misaki-zh",
        "yue",
        "neural-accented",
        "jm_kumo",
        "context",
        sample="你好，有咩可以幫到你？",
    ),
    LanguageRow(
        "es",
        "Spanish",
        "latin",
        "espeak",
        "es",
        "neural",
        "jm_kumo",
        lingua="SPANISH",
        error=0.008,
        sentence_end="",
        sample="Buenos días, ¿en qué puedo ayudarle?",
    ),
    LanguageRow(
        "it",
        "Italian",
        "latin",
        "espeak",
        "it",
        "neural-accented",
        "jm_kumo",
        lingua="ITALIAN",
        error=0.183,
        sample="Buongiorno, come posso aiutarla?",
    ),
    LanguageRow(
        "pt",
        "Portuguese (Brazil)",
        "latin",
        "espeak",
        "pt-br",
        "neural",
        "jm_kumo",
        lingua="PORTUGUESE",
        error=0.078,
        sample="Bom dia, como posso ajudar?",
    ),
    LanguageRow(
        "de",
        "German",
        "latin",
        "espeak",
        "de",
        "neural-accented",
        "jm_kumo",
        lingua="GERMAN",
        error=0.213,
        sample="Guten Tag, wie kann ich Ihnen helfen?",
    ),
    LanguageRow(
        "fr",
        "French",
        "latin",
        "espeak",
        "fr-fr",
        "neural-accented",
        "jm_kumo",
        lingua="FRENCH",
        sample="Bonjour, comment puis-je vous aider ?",
    ),
    LanguageRow(
        "hi",
        "Hindi",
        "devanagari",
        "espeak",
        "hi",
        "neural-accented",
        "jf_alpha",
        lingua="HINDI",
        sentence_end="।॥",
        sample="नमस्ते, मैं आपकी क्या मदद कर सकता हूँ?",
    ),
    # -- formant: espeak-ng's own synthesizer --------------------------------------------------
    _f("nl", "Dutch", "latin", "Goedemiddag, waarmee kan ik u helpen?", lingua="DUTCH"),
    _f("pl", "Polish", "latin", "Dzień dobry, w czym mogę pomóc?", lingua="POLISH"),
    _f("tr", "Turkish", "latin", "Merhaba, size nasıl yardımcı olabilirim?", lingua="TURKISH"),
    _f("ru", "Russian", "cyrillic", "Здравствуйте, чем я могу вам помочь?", lingua="RUSSIAN"),
    _f("uk", "Ukrainian", "cyrillic", "Добрий день, чим я можу допомогти?", lingua="UKRAINIAN"),
    _f("bg", "Bulgarian", "cyrillic", "Добър ден, с какво мога да помогна?", lingua="BULGARIAN"),
    _f("sr", "Serbian", "cyrillic", "Добар дан, како могу да помогнем?", lingua="SERBIAN"),
    _f("mk", "Macedonian", "cyrillic", "Добар ден, како можам да помогнам?", lingua="MACEDONIAN"),
    _f("be", "Belarusian", "cyrillic", "Добры дзень, чым магу дапамагчы?", lingua="BELARUSIAN"),
    _f("kk", "Kazakh", "cyrillic", "Сәлеметсіз бе, сізге қалай көмектесе аламын?", lingua="KAZAKH"),
    _f("vi", "Vietnamese", "latin", "Xin chào, tôi có thể giúp gì cho bạn?", lingua="VIETNAMESE"),
    _f("id", "Indonesian", "latin", "Selamat pagi, ada yang bisa saya bantu?", lingua="INDONESIAN"),
    _f("ms", "Malay", "latin", "Selamat pagi, apa yang boleh saya bantu?", lingua="MALAY"),
    _f("sv", "Swedish", "latin", "God dag, hur kan jag hjälpa dig?", lingua="SWEDISH"),
    _f("da", "Danish", "latin", "Goddag, hvordan kan jeg hjælpe dig?", lingua="DANISH"),
    _f("nb", "Norwegian (Bokmål)", "latin", "God dag, hvordan kan jeg hjelpe deg?", lingua="BOKMAL"),
    _f("fi", "Finnish", "latin", "Hyvää päivää, miten voin auttaa?", lingua="FINNISH"),
    _f("et", "Estonian", "latin", "Tere päevast, kuidas saan aidata?", lingua="ESTONIAN"),
    _f("lv", "Latvian", "latin", "Labdien, kā es varu palīdzēt?", lingua="LATVIAN"),
    _f("lt", "Lithuanian", "latin", "Laba diena, kuo galiu padėti?", lingua="LITHUANIAN"),
    _f("cs", "Czech", "latin", "Dobrý den, jak vám mohu pomoci?", lingua="CZECH"),
    _f("sk", "Slovak", "latin", "Dobrý deň, ako vám môžem pomôcť?", lingua="SLOVAK"),
    _f("sl", "Slovenian", "latin", "Dober dan, kako vam lahko pomagam?", lingua="SLOVENE"),
    _f("hr", "Croatian", "latin", "Dobar dan, kako vam mogu pomoći?", lingua="CROATIAN"),
    _f("bs", "Bosnian", "latin", "Dobar dan, kako vam mogu pomoći?", lingua="BOSNIAN"),
    _f("hu", "Hungarian", "latin", "Jó napot, miben segíthetek?", lingua="HUNGARIAN"),
    _f("ro", "Romanian", "latin", "Bună ziua, cu ce vă pot ajuta?", lingua="ROMANIAN"),
    _f("sq", "Albanian", "latin", "Mirëdita, si mund t'ju ndihmoj?", lingua="ALBANIAN"),
    _f("ca", "Catalan", "latin", "Bon dia, en què us puc ajudar?", lingua="CATALAN"),
    _f("eu", "Basque", "latin", "Egun on, zertan lagun zaitzaket?", lingua="BASQUE"),
    _f("cy", "Welsh", "latin", "Bore da, sut alla i helpu?", lingua="WELSH"),
    _f("ga", "Irish", "latin", "Dia duit, conas is féidir liom cabhrú leat?", lingua="IRISH"),
    _f("is", "Icelandic", "latin", "Góðan daginn, hvernig get ég aðstoðað?", lingua="ICELANDIC"),
    _f("af", "Afrikaans", "latin", "Goeie dag, hoe kan ek help?", lingua="AFRIKAANS"),
    _f("sw", "Swahili", "latin", "Habari, naweza kukusaidia vipi?", lingua="SWAHILI"),
    _f("eo", "Esperanto", "latin", "Bonan tagon, kiel mi povas helpi vin?", lingua="ESPERANTO"),
    _f("az", "Azerbaijani", "latin", "Salam, sizə necə kömək edə bilərəm?", lingua="AZERBAIJANI"),
    _f("el", "Greek", "greek", "Καλημέρα, πώς μπορώ να σας βοηθήσω;", lingua="GREEK"),
    _f("he", "Hebrew", "hebrew", "שלום, איך אפשר לעזור?", lingua="HEBREW"),
    _f("ar", "Arabic", "arabic", "مرحبا، كيف يمكنني مساعدتك؟", lingua="ARABIC", sentence_end="؟"),
    _f("fa", "Persian", "arabic", "سلام، چطور می‌توانم کمک کنم؟", lingua="PERSIAN", sentence_end="؟"),
    _f(
        "ur",
        "Urdu",
        "arabic",
        "السلام علیکم، میں آپ کی کیا مدد کر سکتا ہوں؟",
        lingua="URDU",
        sentence_end="؟۔",
    ),
    _f("mr", "Marathi", "devanagari", "नमस्कार, मी तुमची कशी मदत करू शकतो?", lingua="MARATHI", sentence_end="।"),
    _f("ne", "Nepali", "devanagari", "नमस्ते, म तपाईंलाई कसरी मद्दत गर्न सक्छु?", sentence_end="।"),
    _f("bn", "Bengali", "bengali", "নমস্কার, আমি কীভাবে সাহায্য করতে পারি?", lingua="BENGALI", sentence_end="।"),
    _f(
        "pa",
        "Punjabi",
        "gurmukhi",
        "ਸਤ ਸ੍ਰੀ ਅਕਾਲ, ਮੈਂ ਤੁਹਾਡੀ ਕਿਵੇਂ ਮਦਦ ਕਰ ਸਕਦਾ ਹਾਂ?",
        lingua="PUNJABI",
        sentence_end="।",
    ),
    _f("gu", "Gujarati", "gujarati", "નમસ્તે, હું તમારી કેવી રીતે મદદ કરી શકું?", lingua="GUJARATI"),
    _f("ta", "Tamil", "tamil", "வணக்கம், நான் உங்களுக்கு எப்படி உதவ முடியும்?", lingua="TAMIL"),
    _f("te", "Telugu", "telugu", "నమస్కారం, నేను మీకు ఎలా సహాయం చేయగలను?", lingua="TELUGU"),
    _f("ka", "Georgian", "georgian", "გამარჯობა, რით შემიძლია დაგეხმაროთ?", lingua="GEORGIAN"),
    _f("hy", "Armenian", "armenian", "Բարև ձեզ, ինչով կարող եմ օգնել։", lingua="ARMENIAN", sentence_end="։"),
    _f("th", "Thai", "thai", "สวัสดีครับ มีอะไรให้ช่วยไหมครับ", lingua="THAI"),
    _f("am", "Amharic", "ethiopic", "ሰላም፣ እንዴት ልረዳዎት እችላለሁ።", sentence_end="።"),
)

MEASURED_FILE = "language_errors.json"
"""Beside this module: what `streamtts eval --write-tiers` measured per language."""
NEURAL_MAX_ERROR = 0.10


def measured_tier(error: float) -> Tier:
    """The tier a measured error earns a Kokoro language phonemized by espeak-ng. Above the
    accented bar (0.20) it stays neural-accented: espeak-ng's formant voice measured worse in
    every such language (fr 0.52 against 0.21; see docs/languages.md)."""
    return "neural" if error <= NEURAL_MAX_ERROR else "neural-accented"


def load_measurements() -> dict[str, dict[str, Any]]:
    """{tag: {error, system, sentences, voice, measured_at}} from `MEASURED_FILE` ({} if absent)."""
    try:
        text = (resources.files("streamtts.schemas") / MEASURED_FILE).read_text("utf-8")
        languages = json.loads(text).get("languages", {})
    except (OSError, ModuleNotFoundError, ValueError, AttributeError):
        return {}  # the declared tiers stand (the test suite checks the shipped file reads)
    return {str(k): dict(v) for k, v in languages.items() if isinstance(v, dict)}


def _with_measurements(rows: tuple[LanguageRow, ...]) -> tuple[LanguageRow, ...]:
    """Measured errors replace the declared ones; for a language phonemized by espeak-ng (its
    quality is what the measurement decides) the tier follows too. zh, en and ja keep `neural`:
    the model was trained on them with these G2Ps, and their character error mostly counts
    Whisper's homophones (zh) and spelling."""
    measured = load_measurements()
    out = []
    for r in rows:
        m = measured.get(r.tag)
        if m is None or not r.neural or not isinstance(m.get("error"), int | float):
            out.append(r)
            continue
        error = round(float(m["error"]), 3)
        tier = measured_tier(error) if r.g2p == "espeak" and r.tag not in ("ko", "yue") else r.tier
        out.append(replace(r, error=error, tier=tier))
    return tuple(out)


ROWS = _with_measurements(ROWS)
BY_TAG: dict[str, LanguageRow] = {row.tag: row for row in ROWS}
TAGS: tuple[str, ...] = tuple(row.tag for row in ROWS)
NEURAL_TAGS: frozenset[str] = frozenset(row.tag for row in ROWS if row.neural)
FORMANT_TAGS: frozenset[str] = frozenset(row.tag for row in ROWS if not row.neural)
ESPEAK_G2P_TAGS: frozenset[str] = frozenset(row.tag for row in ROWS if row.neural and row.g2p == "espeak")
"""Neural languages phonemized by misaki's EspeakG2P (ko and the Kokoro v1.0 languages)."""
SENTENCE_END: str = "".join(sorted({c for row in ROWS for c in row.sentence_end}))
"""The table's own sentence stops (Devanagari ।, Arabic ؟, Armenian ։, Ethiopic ።, …)."""
SPACED_STOPS: str = ".!?…"
"""Stops of the Latin-like scripts: a sentence ends at one only before whitespace ("3.5", and
a half-written "Mr." at the end of a streamed fragment, wait for more text)."""
CLOSED_STOPS: str = "".join(sorted(set("。！？" + SENTENCE_END)))
"""Stops that end a sentence by themselves: the CJK full stops and every row's own."""
SENTENCE_STOPS: frozenset[str] = frozenset(SPACED_STOPS + CLOSED_STOPS + "\n")
"""Every character that can end a sentence in a language of the table: the one set the
splitter, the WebSocket's streamed text, SSML and captions cut at."""
REQUEST_LANGUAGES: tuple[str, ...] = ("auto", *TAGS)
"""What a request's `language` may be."""


def row(tag: str) -> LanguageRow | None:
    return BY_TAG.get(tag)


def tier_of(tag: str) -> Tier | None:
    found = BY_TAG.get(tag)
    return found.tier if found else None
