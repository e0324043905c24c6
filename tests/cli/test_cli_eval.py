"""`streamtts eval` argument mistakes are one clear line (no model is loaded for them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtts.cli.main import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--langs", "tlh"], "unknown language(s) ['tlh']"),
        (["--first-min", "a,b"], "--first-min takes comma-separated integers"),
        (["--per-lang", "0"], "must be ≥ 1"),
        (["--set", "/no/such/set.jsonl"], "cannot read /no/such/set.jsonl"),
    ],
)
def test_eval_mistakes_are_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", "--no-pipeline", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("streamtts: error: ") and message in err and "Traceback" not in err


def test_a_malformed_set_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "set.jsonl"
    bad.write_text(
        '{"id": "a", "lang": "en", "text": "Hi."}\n{"id": "b", "lang": "xx", "text": "?"}\n', "utf-8"
    )
    assert main(["eval", "--no-pipeline", "--set", str(bad)]) == 1
    assert "line 2: unknown lang 'xx'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--streamed", "--no-pipeline"], "--streamed sends through the Kafka pipeline"),
        (["--streamed", "--stream-wps", "0.5"], "--stream-wps must be ≥ 1"),
        (["--streamed", "--stream-wps", "nan"], "--stream-wps must be ≥ 1"),
        (["--stream-wps", "10"], "add --streamed"),
        (["--stream-delay-ms", "1000"], "add --streamed"),
        (["--streamed", "--stream-delay-ms", "-1"], "--stream-delay-ms must be 0-10000"),
    ],
)
def test_streamed_mistakes_are_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found before any model loads or any stack starts."""
    assert main(["eval", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("streamtts: error: ") and message in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_an_out_that_is_a_folder_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found after a 20-minute run ended in a trace: the report could not be written."""
    assert main(["eval", "--no-pipeline", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("streamtts: error: ") and "is a directory" in err and "Traceback" not in err
