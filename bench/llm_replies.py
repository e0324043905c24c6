"""The replies `bench --llm-stream` streams: a customer-service mix in en, zh and ja, each
written token by token as an LLM writes it, and where in it the first clause and sentence are
complete (measured from the text, by the rules a listener would use, not by the segment
stage's code)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Reply:
    lang: str
    voice: str
    text: str


REPLIES: tuple[Reply, ...] = (
    # A long first sentence (~180 characters) with a clause boundary after ~20: the case the
    # sentence-at-a-time path serves worst.
    Reply(
        "en",
        "en_joe",
        "Thanks for holding, I have pulled up the order you placed on the website last Tuesday "
        "evening and I can see that the warehouse packed it yesterday but the courier has not "
        "scanned it yet. It should move today. Is there anything else?",
    ),
    Reply(
        "en",
        "en_joe",
        "Sure, I can help with that. Your refund of forty two dollars was approved this morning, "
        "and it usually reaches your card within three to five business days. Anything else?",
    ),
    Reply(
        "en",
        "en_joe",
        "Of course, let me check that for you. The store on Main Street is open until nine tonight, "
        "and the one downtown closes at eight. Would you like directions?",
    ),
    Reply(
        "en",
        "en_joe",
        "I understand, that sounds frustrating. I have escalated the ticket to our technical team, "
        "and someone will call you back within two hours. Thank you for your patience.",
    ),
    Reply(
        "zh",
        "jm_kumo",
        "您好，我已经查到您上周二在网站上下的订单，仓库昨天已经打包好了，但是快递员还没有扫描。"
        "今天应该会发出。还有什么可以帮您的吗？",
    ),
    Reply(
        "zh",
        "jm_kumo",
        "好的，我来帮您查一下。您的退款四十二元今天上午已经批准，通常三到五个工作日到账。还有其他问题吗？",
    ),
    Reply(
        "ja",
        "jf_alpha",
        "お待たせしました、先週の火曜日にご注文いただいた商品を確認しました。倉庫で昨日梱包されましたが、"
        "まだ配送業者にスキャンされていません。今日中に発送される予定です。",
    ),
    Reply(
        "ja",
        "jf_alpha",
        "かしこまりました、確認いたします。四十二ドルの返金は今朝承認されました。通常、三から五営業日でカードに反映されます。",
    ),
)

_CJK = "\u3040-\u30ff\u3400-\u9fff"
_CJK_FINAL = frozenset("，。！？、；：")
_CJK_SENTENCE = frozenset("。！？")
_LATIN_CLAUSE = re.compile(r"[,;:.!?](?=\s)")
_LATIN_SENTENCE = re.compile(r"[.!?](?=\s)")


def _cost(text: str) -> int:
    """A CJK character counts twice (it carries what a short word does)."""
    return sum(2 if re.match(rf"[{_CJK}]", c) else 1 for c in text)


def completing_token(tokens: list[str], *, sentence: bool, min_cost: int = 12) -> int:
    """Index of the token whose arrival completes the first clause (or sentence) costing at
    least `min_cost`. A CJK mark is final as it arrives; a Latin one only once the next token
    shows a space after it (no "3." of "3.5", no "Dr." mid-name)."""
    text = ""
    latin = _LATIN_SENTENCE if sentence else _LATIN_CLAUSE
    cjk = _CJK_SENTENCE if sentence else _CJK_FINAL
    for i, token in enumerate(tokens):
        start = len(text)
        text += token
        for j in range(start, len(text)):
            if text[j] in cjk and _cost(text[: j + 1]) >= min_cost:
                return i
        for m in latin.finditer(text, max(0, start - 1)):
            if _cost(text[: m.start() + 1]) >= min_cost:
                return i
    return len(tokens) - 1
