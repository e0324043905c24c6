"""The streamed-against-whole verdict of `streamtts eval --streamed`."""

from __future__ import annotations

from streamtts.bench.speech_eval import LangRow, format_table


def _row(lang: str, whole: float, streamed: float) -> LangRow:
    rate = {"pipeline": whole, "streamed": streamed}
    return LangRow(lang, 8, rate, {s: 0.0 for s in rate}, {s: "0/1" for s in rate}, {})


def test_the_verdict_tells_worse_from_better() -> None:
    table = format_table(
        [
            _row("zh", 0.300, 0.310),
            _row("mixed", 0.180, 0.239),
            _row("ko", 0.227, 0.203),
            _row("ja", 0.055, 0.075),
        ]
    )
    verdicts = {
        line.split()[0]: line.split()[-1]
        for line in table.split("streamed − pipeline")[1].splitlines()[1:]
        if line
    }
    assert verdicts == {"zh": "yes", "mixed": "no", "ko": "better", "ja": "yes"}
