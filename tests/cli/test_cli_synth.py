"""`streamtts synth` end to end (model) and its argument errors (no model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtts.audio.codecs import decode_audio
from streamtts.cli.main import main


@pytest.mark.model
def test_synth_writes_a_decodable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "hello.opus"
    rc = main(
        [
            "synth",
            "--text",
            "Hello there.",
            "--voice",
            "en_joe",
            "--threads",
            "1",
            "--sample-rate",
            "24000",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    audio, rate = decode_audio(out.read_bytes(), "opus")
    assert rate == 48_000 and len(audio) / rate > 0.3
    err = capsys.readouterr().err
    assert "first chunk" in err and "RTF" in err


def test_synth_user_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["synth", "--text", "   ", "--out", str(tmp_path / "x.wav")]) == 1
    assert "streamtts: error: --text is empty" in capsys.readouterr().err
    assert main(["synth", "--text", "hi", "--out", str(tmp_path / "missing" / "x.wav")]) == 1
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.model
def test_synth_voice_auto_speaks_a_mixed_text_with_one_voice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`auto` is the contract's default voice, so `synth` takes it too (it used to refuse it)."""
    out = tmp_path / "mixed.wav"
    rc = main(["synth", "--text", "请在App里打开您的account设置。", "--voice", "auto", "--out", str(out)])
    assert rc == 0
    audio, rate = decode_audio(out.read_bytes(), "wav")
    assert rate == 24_000 and len(audio) / rate > 1.0  # Kokoro's rate: one voice for it all
    assert "fallback voices" not in capsys.readouterr().err
