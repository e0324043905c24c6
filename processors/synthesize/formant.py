"""espeak-ng's own formant synthesizer, in-process: the voice of every language no neural voice
speaks (`schemas.languages`, tier "formant"), and the last layer when the neural engine fails.

The library comes from the `espeakng-loader` wheel (with its data: 100+ languages). It keeps
global C state, so this engine loads its *own copy* of the shared object (a private file in a
temp dir: phonemizer's espeak backends, which misaki's G2P uses, load theirs the same way) and
serializes every call behind one lock. Synthesis is synchronous: espeak calls back with 16-bit
PCM at its native rate (22 050 Hz); the synthesizer resamples like any engine's output.

"Phonemes" of this engine are the text itself, tagged with the espeak voice that reads it
(espeak-ng phonemizes and reads numbers on its own): one `_RUN` per run, so a span's runs
joined by spaces (see `Synthesizer.phonemize`) still say which voice reads each piece.
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamtts.processors.synthesize.engine import AudioChunk, VoiceSpec
from streamtts.processors.synthesize.exceptions import (
    ModelLoadError,
    SynthesisError,
    UnsupportedLanguageError,
)
from streamtts.schemas.languages import BY_TAG, ROWS

FORMANT_LANGS: frozenset[str] = frozenset(r.tag for r in ROWS if r.espeak and r.tag != "yue")
"""Every row with an espeak voice (the formant voice is the last layer for neural ones too)."""
_RUN = "\x1e"
_VOICE_END = "\x1f"
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_CHARS_UTF8 = 1
_RATE = 1
_DEFAULT_WPM = 175
_EVENT_END = 0
_EVENT_WORD = 1


class _Event(ctypes.Structure):
    """espeak-ng's `espeak_EVENT` (speak_lib.h)."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_char * 8),
    ]


_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)
_MAX_EVENTS_PER_CALLBACK = 10_000
"""A guard against a missing terminator: espeak sends a few events per callback."""


@dataclass
class FormantEngine:
    """espeak-ng speaking text in any of `FORMANT_LANGS` (see the module doc)."""

    lib: Any
    sample_rate: int
    model_id: str
    name: str = "espeak"
    languages: frozenset[str] = FORMANT_LANGS
    timed: bool = True
    """Chunks carry word bounds from espeak's word events."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _pieces: list[np.ndarray] = field(default_factory=list, repr=False)
    _words: list[tuple[int, int, int]] = field(default_factory=list, repr=False)
    """(text position, length, audio ms) of each word espeak reported in the current call."""
    _callback: Any = field(default=None, repr=False)
    _voice: str = field(default="", repr=False)

    @classmethod
    def load(cls) -> FormantEngine:
        """Load a private copy of the espeak-ng library with the wheel's data.

        Raises:
            ModelLoadError: espeakng-loader is missing or the library does not initialize.
        """
        try:
            import espeakng_loader

            source = Path(espeakng_loader.get_library_path())
            data = espeakng_loader.get_data_path()
            private = Path(tempfile.mkdtemp(prefix="streamtts-espeak-")) / source.name
            shutil.copy(source, private)
            lib = ctypes.CDLL(str(private))
        except (ImportError, OSError) as err:
            raise ModelLoadError(f"cannot load espeak-ng: {err}") from err
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_Synth.argtypes = [
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        lib.espeak_Synth.restype = ctypes.c_int
        rate = int(lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, str(data).encode(), 0))
        if rate <= 0:
            raise ModelLoadError(f"espeak-ng did not initialize (data at {data})")
        engine = cls(lib, rate, hashlib.sha256(source.read_bytes()).hexdigest())
        engine._callback = _CALLBACK(engine._collect)
        lib.espeak_SetSynthCallback(engine._callback)
        return engine

    def _collect(self, wav: Any, count: int, events: Any) -> int:
        if count > 0 and wav:
            self._pieces.append(np.ctypeslib.as_array(wav, shape=(count,)).astype(np.float32) / 32768.0)
        if events:
            for k in range(_MAX_EVENTS_PER_CALLBACK):
                event = events[k]
                if event.type == _EVENT_END:
                    break
                if event.type == _EVENT_WORD:
                    self._words.append((event.text_position, event.length, event.audio_position))
        return 0

    def warm_up(self) -> None:
        for _ in self.synthesize("Hello.", "en", _NO_VOICE):
            pass

    def phonemize(self, text: str, lang: str) -> str:
        """The text tagged with its espeak voice (espeak-ng phonemizes it itself)."""
        row = BY_TAG.get(lang)
        if row is None or lang not in self.languages:
            raise UnsupportedLanguageError(f"espeak-ng has no voice for {lang!r}")
        clean = text.replace(_RUN, " ").replace(_VOICE_END, " ").strip()
        return f"{_RUN}{row.espeak}{_VOICE_END}{clean}" if clean else ""

    def from_ipa(self, ipa: str, lang: str) -> str:
        return ""  # IPA input is not mapped to espeak's mnemonics: the text is read instead

    def synthesize_phonemes(
        self, phonemes: str, voice: VoiceSpec, speed: float = 1.0
    ) -> Iterator[AudioChunk]:
        """One chunk: every tagged run of `phonemes` spoken in turn by its espeak voice, with
        `bounds` from espeak's word events when `timed` (each character of a word spans the
        word's audio: "phonemes" of this engine are characters)."""
        runs = _runs(phonemes)
        if not runs:
            return
        words: list[tuple[int, int, int, int]] = []  # (char start, char end, sample start, run end)
        with self._lock:
            self._pieces = []
            self.lib.espeak_SetParameter(_RATE, round(_DEFAULT_WPM * speed), 0)
            for espeak_voice, text, at in runs:
                self._set_voice(espeak_voice)
                self._words = []
                before = sum(len(p) for p in self._pieces)
                data = text.encode("utf-8")
                err = self.lib.espeak_Synth(data, len(data) + 1, 0, 0, 0, _CHARS_UTF8, None, None)
                if err != 0:
                    raise SynthesisError(f"espeak-ng failed ({err}) on voice {espeak_voice!r}")
                after = sum(len(p) for p in self._pieces)
                for position, length, ms in self._words:
                    start = at + max(0, position - 1)  # espeak counts characters from 1
                    sample = min(after, before + round(ms * self.sample_rate / 1000))
                    words.append((start, min(at + len(text), start + max(1, length)), sample, after))
            pieces, self._pieces, self._words = self._pieces, [], []
        if pieces:
            samples = np.concatenate(pieces)
            bounds = _bounds(len(phonemes), words) if self.timed and words else None
            yield AudioChunk(samples, self.sample_rate, phonemes, bounds=bounds)

    def _set_voice(self, name: str) -> None:
        if name == self._voice:
            return
        for candidate in (name, name.split("-", 1)[0]):
            if self.lib.espeak_SetVoiceByName(candidate.encode()) == 0:
                self._voice = name
                return
        raise UnsupportedLanguageError(f"espeak-ng has no voice {name!r}")

    def synthesize(self, text: str, lang: str, voice: VoiceSpec, speed: float = 1.0) -> Iterator[AudioChunk]:
        yield from self.synthesize_phonemes(self.phonemize(text, lang), voice, speed)


def _runs(phonemes: str) -> list[tuple[str, str, int]]:
    """(espeak voice, stripped text, its index in `phonemes`) of each non-empty tagged run."""
    out = []
    at = 0
    for piece in phonemes.split(_RUN):
        start = at
        at += len(piece) + 1
        if _VOICE_END not in piece:
            continue
        voice, text = piece.split(_VOICE_END, 1)
        stripped = text.strip()
        if stripped:
            lead = len(text) - len(text.lstrip())
            out.append((voice, stripped, start + len(voice) + 1 + lead))
    return out


def _bounds(n: int, events: list[tuple[int, int, int, int]]) -> np.ndarray:
    """(n, 2) sample bounds per character: a word's characters span from its first event to
    the next word's (or its run's end); the characters between words are empty at the last
    end. espeak reports a number as several words at one text position ("48213": czterdzieści,
    osiem, tysięcy, …): events over characters already seen extend that word."""
    words: list[list[int]] = []  # [char start, char end, sample start, run end]
    for a, b, start, run_end in sorted(events, key=lambda e: (e[2], e[0])):
        if words and words[-1][3] == run_end and a < words[-1][1] and b > words[-1][0]:
            words[-1][0], words[-1][1] = min(words[-1][0], a), max(words[-1][1], b)
            continue
        words.append([a, b, start, run_end])
    bounds = np.zeros((n, 2), dtype=np.int64)
    last = 0
    cursor = 0
    for k, (a, b, start, run_end) in enumerate(words):
        following = words[k + 1][2] if k + 1 < len(words) and words[k + 1][3] == run_end else run_end
        end = max(start, min(following, run_end))
        a = max(a, cursor)
        bounds[cursor:a] = last
        bounds[a:b, 0] = start
        bounds[a:b, 1] = end
        last, cursor = end, max(cursor, b)
    bounds[cursor:] = last
    return bounds


_NO_VOICE = VoiceSpec("espeak", "espeak", FORMANT_LANGS, 22_050)
