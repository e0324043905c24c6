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


@pytest.mark.model
def test_synth_captions_are_a_webvtt_file_of_the_text(tmp_path: Path) -> None:
    import webvtt

    out, captions = tmp_path / "call.wav", tmp_path / "call.vtt"
    text = "Thank you for calling. 您好，请稍等。"
    assert main(["synth", "--text", text, "--out", str(out), "--captions", str(captions)]) == 0
    cues = webvtt.read(str(captions))
    assert [c.raw_text for c in cues] == ["Thank you for calling.", "您好，请稍等。"]
    audio, rate = decode_audio(out.read_bytes(), "wav")
    assert cues[-1].end_in_seconds <= len(audio) / rate
    srt = tmp_path / "call.srt"
    assert (
        main(
            [
                "synth",
                "--text",
                "Hello there.",
                "--voice",
                "en_joe",
                "--out",
                str(out),
                "--captions",
                str(srt),
            ]
        )
        == 0
    )
    assert srt.read_text().startswith("1\n00:00:00,")


def test_synth_captions_extension_mistake_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            ["synth", "--text", "hi", "--out", str(tmp_path / "x.wav"), "--captions", str(tmp_path / "x.txt")]
        )
        == 1
    )
    assert "streamtts: error: --captions must end in .vtt, .srt or .json" in capsys.readouterr().err
