"""Which digit strings people read digit by digit, and numeric ranges, by context.

A verification code, phone number, order number or card tail is said one digit at a time
("验证码是三八二九一五", "ending in four three two one"), never as a quantity (三十八万…).
This pass runs before quantity verbalization (`numbers`): it rewrites codes into digit words
and ranges ("3-5天", "10-20%") into "A to B" with the numbers left for the quantity pass.

A digit string is a code when
- a code word comes shortly before it in the same clause (验证码, 电话, 尾号, code, PIN,
  "ending in", #, 番号, 暗証番号 …) and no unit, currency or counter follows it;
- it has the shape of a phone number (groups joined by "-" or spaces with ≥ 7 digits, a
  "+country" or "(area)" prefix);
- it starts with 0, or has ≥ 7 digits with nothing attached (quantities that long are written
  with separators or units).
"""

from __future__ import annotations

import re

# Code words, per language, that make the digits after them a code. Longest first so that
# "手机号" wins over "手机".
_CODE_WORDS: dict[str, list[str]] = {
    "zh": (
        "验证码|校验码|动态码|确认码|取件码|提货码|兑换码|邀请码|激活码|授权码|密码|口令|PIN码|pin码|"
        "电话号码|手机号码|手机号|电话|手机|热线|座机|分机|拨打|致电|拨|号码|编号|单号|订单号|订单|"
        "运单号|快递单号|工单号|工单|流水号|交易号|尾号|末尾|后四位|卡号|账号|帐号|账户|帐户|工号|"
        "学号|会员号|身份证号|身份证|护照号|车牌号|房间号|房号|邮编|邮政编码|航班号|航班|车次|"
        "序列号|批次号|取号|排队号|桌号|代码|代号|识别码|注册码|序号|ID|id|PIN|pin|code|OTP"
    ).split("|"),
    "en": (
        "verification code|security code|confirmation code|access code|passcode|password|"
        "code|PIN|pin|OTP|one-time password|phone number|phone|telephone|mobile|cell|call|dial|"
        "fax|extension|ext\\.|ext|hotline|account number|account|order number|order|"
        "reference number|reference|ref\\.|ref|confirmation number|confirmation|tracking number|"
        "tracking|ticket number|ticket|case number|case|invoice|booking|reservation|flight|"
        "room|zip code|zip|postcode|serial number|serial|member ID|ID|id|No\\.|no\\.|number|"
        "ending in|ending with|ends in|last four digits|last four|last 4 digits|last 4|digits|#"
    ).split("|"),
    "ja": (
        "認証コード|確認コード|ワンタイムパスワード|パスワード|暗証番号|電話番号|携帯番号|電話|"
        "携帯|内線|会員番号|注文番号|予約番号|受付番号|お問い合わせ番号|問い合わせ番号|口座番号|"
        "口座|カード番号|郵便番号|番号|末尾|下4桁|下四桁|コード|ID"
    ).split("|"),
}
# Words that only make sense as codes: two digits after them are a code too ("PIN 42").
_SHORT_CODE_WORDS = frozenset(
    "验证码 校验码 动态码 密码 尾号 末尾 后四位 code PIN pin OTP passcode password 暗証番号 "
    "PIN码 pin码 "
    "認証コード 確認コード パスワード 末尾 下4桁 下四桁 # ending".split()
)

# After a code word, a few connecting characters may come before the digits: 是/为/：/is/of…
_FILLER = r"[^\d。！？.!?\n]{0,10}?"
_BEFORE_RE = {
    lang: re.compile(
        r"(?P<word>"
        + "|".join(sorted((w if "\\" in w else re.escape(w) for w in words), key=len, reverse=True))
        + r")"
        + _FILLER
        + r"$",
        re.IGNORECASE if lang == "en" else 0,
    )
    for lang, words in _CODE_WORDS.items()
}
# A digit string: digits, optionally in groups joined by single "-" or " " (a phone number),
# with an optional "+country" or "(area)" in front. Decimals and thousands separators are not
# part of it (they make a quantity).
DIGITS_RE = re.compile(
    r"(?<![\d.,:/])"
    r"(?P<plus>\+\s?)?"
    r"(?P<area>\(\d{1,4}\)\s?)?"
    r"(?P<body>\d+(?:[- ]\d+)*)"
    r"(?![\d]|[.,:]\d)"
)
# A range: two numbers joined by a dash or a tilde (or 到/至/から already in words).
RANGE_RE = re.compile(
    r"(?<![\d.,:/-])(?P<a>\d{1,4}(?:\.\d+)?)(?P<pa>%?)\s*(?P<dash>[-–—~～])\s*"
    r"(?P<b>\d{1,4}(?:\.\d+)?)(?P<pb>%?)(?![\d:]|-\d)"
)

# What may follow a number to make it a quantity even after a code word (电话费100元).
_QUANTITY_AFTER = {
    "zh": re.compile(
        r"\s*(?:%|‰|元|块|角|毛|美元|欧元|英镑|日元|个|天|年|月|日|号|岁|次|人|件|位|只|张|台|份|倍|度|"
        r"斤|克|千克|公斤|米|公里|里|秒|分钟|小时|周|期|楼|层|折|条|本|家|辆|分|点|GB|MB|kg|km|元整)"
    ),
    "en": re.compile(
        r"\s*(?:%|percent|dollars?|cents?|euros?|pounds?|yen|years?|months?|weeks?|days?|hours?|"
        r"minutes?|seconds?|times|items?|people|persons?|users?|kg|km|GB|MB|mph|st\b|nd\b|rd\b|"
        r"th\b|am\b|pm\b|AM\b|PM\b)",
    ),
    "ja": re.compile(
        r"\s*(?:%|円|ドル|個|人|名|件|回|日|年|月|時|分|秒|歳|才|枚|台|本|冊|杯|倍|度|階|番目|週|"
        r"キロ|メートル|グラム|パーセント)"
    ),
}

_ZH_DIGITS = "零一二三四五六七八九"
_EN_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_JA_DIGITS = ("ゼロ", "いち", "に", "さん", "よん", "ご", "ろく", "なな", "はち", "きゅう")
# How people group an unseparated digit string when reading it (a group per breath).
# A code's digit words are wrapped in these two private-use characters (normalization has
# removed every private-use character from the input, so they cannot come from the user):
# the splitter never cuts between them, and the segmenter removes them from the spans.
CODE_OPEN, CODE_CLOSE = "\ue000", "\ue001"
_GROUPS = {5: (2, 3), 6: (3, 3), 7: (3, 4), 8: (4, 4), 9: (3, 3, 3), 10: (3, 3, 4), 11: (3, 4, 4)}


def _groups(digits: str) -> list[str]:
    sizes = _GROUPS.get(len(digits))
    if len(digits) <= 4 or (sizes is None and len(digits) < 12):
        return [digits]
    if sizes is None:
        sizes = tuple([4] * (len(digits) // 4)) + ((len(digits) % 4,) if len(digits) % 4 else ())
    out, pos = [], 0
    for size in sizes:
        out.append(digits[pos : pos + size])
        pos += size
    return out


def read_digits(groups: list[str], lang: str) -> str:
    """Digit groups spoken one digit at a time, each digit its own word (glued together, the
    Chinese G2P makes one fast word of them: "一二三四" was heard as "要三次"), groups apart by
    a comma: the short breath people take ("382, 915"). The splitter does not cut inside a
    code's marks, so that comma never ends a span."""
    if lang == "en":
        return ", ".join(" ".join(_EN_DIGITS[int(d)] for d in g) for g in groups)
    if lang == "ja":
        return "、".join("".join(_JA_DIGITS[int(d)] for d in g) for g in groups)
    return "，".join(" ".join(_ZH_DIGITS[int(d)] for d in g) for g in groups)


_DATE_SHAPE_RE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}")


def _is_phone_shape(m: re.Match[str]) -> bool:
    body = m.group("body")
    if _DATE_SHAPE_RE.fullmatch(body):
        return False  # 2024-03-15 is a date
    groups = re.split(r"[- ]", body)
    ndigits = sum(len(g) for g in groups)
    if m.group("plus") or m.group("area"):
        return ndigits >= 5
    if len(groups) < 2 or ndigits < 7:
        return False
    if any(len(g) < 2 for g in groups):
        return False
    if len(groups) == 2:
        a, b = (int(g) for g in groups)
        years = all(len(g) == 4 for g in groups) and 1100 <= a < b <= 2099
        # "1000-2000" is a range of round numbers and "1999-2005" one of years;
        # "2345-6789" is a phone number.
        return not (years or (a % 100 == 0 and b % 100 == 0))
    return True


def _code_word_before(before: str, lang: str) -> str | None:
    """The code word shortly before a number, in the number's language or another one
    ("Your 验证码 is 382915")."""
    tail = before[-32:]
    for word_lang in (lang, *(k for k in _BEFORE_RE if k != lang)):
        m = _BEFORE_RE[word_lang].search(tail)
        if m is None:
            continue
        word = m.group("word")
        start = len(tail) - len(m.group(0))
        if (
            word[0].isascii()
            and word[0].isalpha()
            and start > 0
            and tail[start - 1].isascii()
            and tail[start - 1].isalpha()
        ):
            continue  # "barcode" is not "code", "paid" is not "id"
        return word
    return None


def _quantity_follows(text: str, end: int, lang: str) -> bool:
    pattern = _QUANTITY_AFTER.get(lang)
    return pattern is not None and pattern.match(text, end) is not None


def _is_code(text: str, start: int, end: int, before: str, lang: str) -> bool:
    """Whether the digits text[start:end] (one group, no separators) are a code."""
    digits = text[start:end]
    if _quantity_follows(text, end, lang):
        return False
    if start > 0 and text[start - 1] in "$€£¥￥":
        return False
    if start > 0 and text[start - 1] == "#":
        return True
    word = _code_word_before(before + text[:start], lang)
    if word is not None:
        short_ok = word in _SHORT_CODE_WORDS or word.lower() in _SHORT_CODE_WORDS
        return len(digits) >= (2 if short_ok else 3)
    if len(digits) >= 2 and digits[0] == "0":
        return True
    return len(digits) >= 7


def read_codes(text: str, lang: str, before: str = "") -> str:
    """Rewrite code-like digit strings of `text` into digit words; leave quantities alone.

    Args:
        text: a run in one language (zh, yue, en, ja).
        lang: its language; others are returned unchanged.
        before: the text preceding the run in its sentence (a code word may be there:
            "您的PIN是1234" has "PIN" in an English run before the Chinese one).
    """
    if lang == "yue":
        lang = "zh"
    if lang not in _CODE_WORDS or not any(c.isdigit() for c in text):
        return text
    out: list[str] = []
    pos = 0
    for m in DIGITS_RE.finditer(text):
        if m.start() < pos:
            continue
        body = m.group("body")
        dashed = "-" in body and " " not in body
        if _is_phone_shape(m) or (
            dashed
            and _code_word_before(before + text[: m.start()], lang) is not None
            and not _quantity_follows(text, m.end(), lang)
        ):
            # A phone number, or a dashed code after a code word ("取件码5-2-1106").
            start, end = m.start(), m.end()
            groups = [g for part in re.split(r"[- ]", body) for g in _groups(part)]
            if m.group("area"):
                groups = [re.sub(r"\D", "", m.group("area")), *groups]
            spoken = read_digits(groups, lang)
            if m.group("plus"):
                spoken = {"en": "plus ", "zh": "加", "ja": "プラス"}[lang] + spoken
        else:
            # Not one phone number: only the first group can be a code ("验证码是382915 5分钟
            # 内有效" has the code, then a quantity).
            start = m.start("body")
            end = start + len(re.split(r"[- ]", m.group("body"))[0])
            if not _is_code(text, start, end, before, lang):
                continue
            spoken = read_digits(_groups(text[start:end]), lang)
        left = text[pos:start]
        if left.endswith("#"):  # "#12345": the sign is said as a word, or not at all
            left = left[:-1] + ("number " if lang == "en" else "")
        # Keep words apart from the digit words in English ("code382915" → "code three…").
        sep_l = " " if lang == "en" and left and left[-1].isalnum() else ""
        sep_r = " " if lang == "en" and text[end : end + 1].isalnum() else ""
        out.append(f"{left}{sep_l}{CODE_OPEN}{spoken}{CODE_CLOSE}{sep_r}")
        pos = end
    out.append(text[pos:])
    return "".join(out)


_RANGE_WORD = {"en": " to ", "zh": "到", "yue": "到", "ja": "から"}


def read_ranges(text: str, lang: str) -> str:
    """ "3-5天" → "3到5天", "10-20%" → "10%到20%", "2023-2024" → "2023 to 2024": the numbers
    stay digits for the quantity pass. Phone-shaped pairs ("2345-6789") are not ranges."""
    word = _RANGE_WORD.get(lang)
    if word is None or not any(c.isdigit() for c in text):
        return text

    def one(m: re.Match[str]) -> str:
        a, b = m.group("a"), m.group("b")
        if m.group("dash") in "-–—" and len(a) >= 3 and len(b) >= 3 and "." not in a + b:
            both_round = int(a) % 100 == 0 and int(b) % 100 == 0
            both_years = all(1100 <= int(x) <= 2099 for x in (a, b)) and len(a) == len(b) == 4
            if not (both_round or both_years or m.group("pb")):
                return m.group(0)  # "400-820" is a number, not a range
        try:
            if float(a) >= float(b):
                return m.group(0)  # "5-3" is a score or a label, not a range
        except ValueError:
            return m.group(0)
        percent = "%" if (m.group("pa") or m.group("pb")) else ""
        return f"{a}{percent}{word}{b}{percent}"

    return RANGE_RE.sub(one, text)
