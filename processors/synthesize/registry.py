"""Voice registry: voice ids → engines, languages and styles; owns the loaded engines.

Voices:
- bundled Kokoro packs (jf_alpha, jf_gongitsune, jf_nezumi, jf_tebukuro, jm_kumo) — Japanese
  packs, but the Kokoro model speaks zh/en/ja (ko experimental, yue as Mandarin) with them;
- the bundled Piper voice `en_joe` (en_US-joe-medium, English only);
- user voices from a directory: `NAME.onnx` + `NAME.onnx.json` (Piper models), `NAME.npy`
  (one Kokoro style pack) or `FILE.npz` (one pack per array name);
- blends of Kokoro packs: "jm_kumo:0.7+jf_gongitsune:0.3" (weights normalized to sum 1).

Engines are loaded lazily, once, under a lock, and shared by all threads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamtts.processors.synthesize.engine import SpeechEngine, VoiceSpec
from streamtts.processors.synthesize.exceptions import (
    InvalidVoiceError,
    UnknownVoiceError,
    UnsupportedLanguageError,
)
from streamtts.processors.synthesize.formant import FORMANT_LANGS
from streamtts.processors.synthesize.g2p import G2PBank
from streamtts.processors.synthesize.kokoro import KOKORO_LANGS, bundled_voice_packs
from streamtts.schemas.languages import FORMANT_VOICE, NEURAL_TAGS, ROWS

KOKORO = "kokoro"
FORMANT = "espeak"
JOE_VOICE_ID = "en_joe"

# Per-language voices used when a request's voice cannot speak a span's language. jm_kumo and
# jf_gongitsune came back word-perfect in English and near-perfect in Chinese from ASR;
# jf_alpha is the most natural Japanese voice; Piper's joe is native English and ~10x faster.
# The table's `voice` per language (zh/ko/yue jm_kumo, ja jf_alpha, en en_joe; es/it/pt/fr
# jm_kumo, de/hi jf_alpha as measured; every formant row espeak).
DEFAULT_BASE_VOICES: Mapping[str, str] = {row.tag: row.voice for row in ROWS}
_BUNDLED_NOTES = {
    "jf_alpha": "Kokoro, female; natural Japanese, accented English",
    "jf_gongitsune": "Kokoro, female; good Chinese and English",
    "jf_nezumi": "Kokoro, female",
    "jf_tebukuro": "Kokoro, female",
    "jm_kumo": "Kokoro, male; good Chinese and English",
}
_BLEND_CACHE_MAX = 64
# After each language's base voice, the voices "auto" prefers for a sentence in several
# languages: both spoke English word-perfect and Chinese near-perfect in our ASR checks.
AUTO_MULTILINGUAL: tuple[str, ...] = ("jm_kumo", "jf_gongitsune")


def voice_class(voice_id: str) -> str:
    """The voice as a metrics label and breaker class: registered ids stay as they are, every
    blend is "blend" — weights are free numbers, and each distinct one would otherwise be a new
    time series and a new breaker entry."""
    return "blend" if "+" in voice_id or ":" in voice_id else voice_id


class VoiceRegistry:
    """Resolves voice ids to `VoiceSpec`s and owns the engines that speak them."""

    def __init__(
        self,
        *,
        threads: int = 2,
        providers: Sequence[str] | None = None,
        user_voice_dir: Path | None = None,
        base_voices: Mapping[str, str] | None = None,
        g2p: G2PBank | None = None,
        spin: bool = False,
    ) -> None:
        """Args:
        threads: onnxruntime intra-op threads per engine.
        spin: let onnxruntime's idle intra-op threads busy-wait (see `make_session`).
        providers: onnxruntime providers (default: CUDA when available, then CPU).
        user_voice_dir: directory with extra voices (see module doc); ignored if None.
        base_voices: language → voice id overrides of `DEFAULT_BASE_VOICES`.
        g2p: phonemizer bank shared by all engines (created if None).
        Raises:
            InvalidVoiceError: a user voice file is malformed.
            UnknownVoiceError: a base voice is not registered.
        """
        self.threads = threads
        self.spin = spin
        self.providers = providers
        self.g2p = g2p or G2PBank()
        self._lock = threading.RLock()
        self._engines: dict[str, SpeechEngine] = {}
        self._piper_sources: dict[str, tuple[Path | None, Path | None]] = {}
        self._voices: dict[str, VoiceSpec] = {}
        self._blends: dict[str, VoiceSpec] = {}

        for voice_id, pack in bundled_voice_packs().items():
            self._add_kokoro(voice_id, pack, _BUNDLED_NOTES.get(voice_id, "Kokoro"))
        self._add_piper(JOE_VOICE_ID, None, None, 22_050, "en", "Piper en_US-joe-medium, male")
        self._voices[FORMANT_VOICE] = VoiceSpec(
            FORMANT_VOICE,
            FORMANT,
            FORMANT_LANGS,
            22_050,
            1.0,
            None,
            "espeak-ng formant synthesizer (robotic)",
        )
        if user_voice_dir is not None:
            self._load_user_voices(Path(user_voice_dir))
        self.base_voices = dict(DEFAULT_BASE_VOICES) | dict(base_voices or {})
        for voice_id in self.base_voices.values():
            self.spec(voice_id)  # fail fast on a misconfigured base voice

    # -- registration ---------------------------------------------------------------------

    def _add_kokoro(self, voice_id: str, pack: np.ndarray, note: str) -> None:
        pack = np.asarray(pack, dtype=np.float32)
        if pack.ndim == 2:
            pack = pack[:, None, :]
        if pack.ndim != 3 or pack.shape[1:] != (1, 256) or pack.shape[0] < 2:
            raise InvalidVoiceError(f"voice pack {voice_id!r} has shape {pack.shape}; expected (510, 1, 256)")
        self._voices[voice_id] = VoiceSpec(voice_id, KOKORO, KOKORO_LANGS, 24_000, 1.0, pack, note)

    def _add_piper(
        self,
        voice_id: str,
        model: Path | None,
        config: Path | None,
        rate: int,
        family: str,
        note: str,
    ) -> None:
        engine_key = f"piper:{voice_id}"
        self._piper_sources[engine_key] = (model, config)
        self._voices[voice_id] = VoiceSpec(voice_id, engine_key, frozenset({family}), rate, 1.0, None, note)

    def _load_user_voices(self, directory: Path) -> None:
        if not directory.is_dir():
            raise InvalidVoiceError(f"user voice directory {directory} does not exist")
        for path in sorted(directory.iterdir()):
            try:
                if path.suffix == ".onnx":
                    config_path = path.with_name(path.name + ".json")
                    config = json.loads(config_path.read_text("utf-8"))
                    family = str(config.get("language", {}).get("family") or "en")
                    rate = int(config["audio"]["sample_rate"])
                    self._add_piper(path.stem, path, config_path, rate, family, f"user: {path}")
                elif path.suffix == ".npy":
                    self._add_kokoro(path.stem, np.load(path), f"user: {path}")
                elif path.suffix == ".npz":
                    with np.load(path) as npz:
                        for key in npz.files:
                            self._add_kokoro(key, npz[key], f"user: {path}")
            except (OSError, ValueError, KeyError) as err:
                raise InvalidVoiceError(f"cannot load user voice {path}: {err}") from err

    # -- lookup ---------------------------------------------------------------------------

    def voice_ids(self) -> list[str]:
        """Registered voice ids (blends not included)."""
        return sorted(self._voices)

    def spec(self, voice_id: str) -> VoiceSpec:
        """Resolve a voice id or a blend expression.

        Raises:
            UnknownVoiceError: unknown id (the message lists the available voices).
            InvalidVoiceError: a malformed blend or a blend of non-Kokoro voices.
        """
        voice_id = voice_id.strip()
        found = self._voices.get(voice_id)
        if found is not None:
            return found
        if "+" in voice_id or ":" in voice_id:
            return self._blend(voice_id)
        raise UnknownVoiceError(
            f"unknown voice {voice_id!r}; available: {', '.join(self.voice_ids())} "
            "(or a Kokoro blend like 'jm_kumo:0.7+jf_gongitsune:0.3')"
        )

    def _blend(self, expression: str) -> VoiceSpec:
        with self._lock:
            cached = self._blends.get(expression)
        if cached is not None:
            return cached
        parts: list[tuple[VoiceSpec, float]] = []
        for term in expression.split("+"):
            name, _, weight_text = term.strip().partition(":")
            try:
                weight = float(weight_text) if weight_text else 1.0
            except ValueError as err:
                raise InvalidVoiceError(f"bad weight {weight_text!r} in blend {expression!r}") from err
            if not weight > 0 or not np.isfinite(weight):
                raise InvalidVoiceError(f"blend weights must be positive, got {weight_text!r}")
            spec = self.spec(name.strip())  # UnknownVoiceError names the bad part
            if spec.engine != KOKORO or spec.style is None:
                raise InvalidVoiceError(f"only Kokoro voices can be blended, not {name!r}")
            parts.append((spec, weight))
        total = sum(w for _, w in parts)
        packs = [(p.style, w) for p, w in parts if p.style is not None]
        style = np.zeros_like(packs[0][0])
        for pack, weight in packs:
            style += pack * np.float32(weight / total)
        canonical = "+".join(f"{s.voice_id}:{w / total:.3g}" for s, w in parts)
        blended = VoiceSpec(
            canonical,
            KOKORO,
            KOKORO_LANGS,
            24_000,
            1.0,
            np.asarray(style, np.float32),
            f"blend of {canonical}",
        )
        with self._lock:
            if len(self._blends) >= _BLEND_CACHE_MAX:
                self._blends.pop(next(iter(self._blends)))
            self._blends[expression] = blended
        return blended

    def base_voice(self, lang: str) -> VoiceSpec:
        """The fallback voice for `lang`.

        Raises:
            UnsupportedLanguageError: no base voice for the language.
        """
        voice_id = self.base_voices.get(lang)
        if voice_id is None:
            raise UnsupportedLanguageError(
                f"no voice speaks {lang!r}; supported: {', '.join(sorted(self.base_voices))}"
            )
        return self.spec(voice_id)

    def voice_for(self, voice_id: str | None, langs: str | Iterable[str]) -> tuple[VoiceSpec, bool]:
        """Voice to speak `langs` (one language or all of a mixed span's) for a request that
        asked for `voice_id`.

        Returns:
            (spec, substituted): the requested voice if it speaks them all, else the one voice
            "auto" picks for them (the base voice for one language) with substituted=True (a
            degradation the caller should report). Without `voice_id`: the "auto" pick.
        Raises:
            UnsupportedLanguageError: no voice speaks them all.
        """
        wanted = frozenset({langs} if isinstance(langs, str) else langs)
        if voice_id:
            spec = self.spec(voice_id)
            if wanted <= spec.languages:
                return spec, False
        if len(wanted) == 1:
            chosen = self.base_voice(next(iter(wanted)))
        else:
            found = self.voice_for_langs(wanted)
            if found is None:
                raise UnsupportedLanguageError(f"no single voice speaks {', '.join(sorted(wanted))}")
            chosen = self.spec(found)
        return chosen, bool(voice_id)

    def languages_of(self, voice_id: str) -> frozenset[str]:
        """Languages `voice_id` (or a blend) speaks.

        Raises:
            UnknownVoiceError, InvalidVoiceError: as `spec`.
        """
        return self.spec(voice_id).languages

    def voice_for_langs(self, langs: Iterable[str]) -> str | None:
        """The one voice "auto" picks to speak all of `langs`, or None if no voice can.

        Each language ranks the voices: its base voice first, then `AUTO_MULTILINGUAL`, then
        every other voice that speaks it. The voice with the lowest rank sum wins (ties: the
        earlier in that order), so one language gets its base voice ("en" → en_joe) and
        zh + en gets jm_kumo (zh's base voice, and second for English).
        """
        wanted = sorted(set(langs))
        if not wanted:
            return None
        order = list(dict.fromkeys([*self.base_voices.values(), *AUTO_MULTILINGUAL, *self.voice_ids()]))
        order = [v for v in order if v in self._voices]
        if set(wanted) & NEURAL_TAGS:  # a neural language is never given to the formant voice here
            order = [v for v in order if self._voices[v].engine != FORMANT]
        best: tuple[int, int, str] | None = None
        for position, voice_id in enumerate(order):
            if not set(wanted) <= self._voices[voice_id].languages:
                continue
            score = sum(self._rank(voice_id, lang, order) for lang in wanted)
            if best is None or (score, position) < best[:2]:
                best = (score, position, voice_id)
        return best[2] if best else None

    def _rank(self, voice_id: str, lang: str, order: list[str]) -> int:
        base = self.base_voices.get(lang)
        ranked = [base] if base else []
        ranked += [v for v in (*AUTO_MULTILINGUAL, *order) if v != base and lang in self._voices[v].languages]
        return list(dict.fromkeys(ranked)).index(voice_id)

    # -- engines --------------------------------------------------------------------------

    def engine(self, spec: VoiceSpec) -> SpeechEngine:
        """The loaded engine for a voice (loaded on first use, once)."""
        with self._lock:
            engine = self._engines.get(spec.engine)
            if engine is None:
                engine = self._load_engine(spec.engine)
                self._engines[spec.engine] = engine
            return engine

    def _load_engine(self, key: str) -> SpeechEngine:
        if key == FORMANT:
            from streamtts.processors.synthesize.formant import FormantEngine

            return FormantEngine.load()
        if key == KOKORO:
            from streamtts.processors.synthesize.kokoro import KokoroEngine

            return KokoroEngine.load(
                threads=self.threads, providers=self.providers, g2p=self.g2p, spin=self.spin
            )
        from streamtts.processors.synthesize.piper import PiperEngine

        model, config = self._piper_sources[key]
        return PiperEngine.load(
            model,
            config,
            threads=self.threads,
            providers=self.providers,
            name=key.removeprefix("piper:"),
            spin=self.spin,
        )

    def loaded_engines(self) -> dict[str, SpeechEngine]:
        """Engines loaded so far (for metrics and health)."""
        with self._lock:
            return dict(self._engines)

    def warm_up(self, voice_ids: Iterable[str] = ("jm_kumo",), langs: Iterable[str] = ("zh", "en")) -> None:
        """Load the engines of `voice_ids`, the phonemizers of `langs`, and run one inference
        per voice so that the first request pays no lazy initialization."""
        langs = tuple(langs)
        self.g2p.warm_up(langs)
        for voice_id in voice_ids:
            spec = self.spec(voice_id)
            lang = next((lang for lang in langs if lang in spec.languages), None)
            if lang is None:
                lang = next(iter(sorted(spec.languages)))
            engine = self.engine(spec)
            for _ in engine.synthesize(
                "Hi." if lang == "en" else _WARM_TEXT.get(lang, "Hi."), lang, spec, 1.0
            ):
                pass

    def formant_voice(self) -> VoiceSpec:
        """espeak-ng's formant voice (the last layer before the "please wait" clip)."""
        return self._voices[FORMANT_VOICE]

    def describe_languages(self) -> list[dict[str, Any]]:
        """The language table as the voices endpoint and CLI list it (tag, tier, voice, error)."""
        return [
            {
                "language": row.tag,
                "name": row.name,
                "tier": row.tier,
                "voice": self.base_voices.get(row.tag, row.voice),
                "g2p": row.g2p if row.neural else "espeak-ng",
                "error": row.error,
            }
            for row in ROWS
        ]

    def describe(self) -> list[dict[str, Any]]:
        """Voice table for CLIs and health endpoints."""
        return [
            {
                "voice_id": v.voice_id,
                "engine": v.engine,
                "languages": sorted(v.languages),
                "sample_rate": v.sample_rate,
                "description": v.description,
            }
            for v in (self._voices[k] for k in self.voice_ids())
        ]


_WARM_TEXT = {"zh": "你好。", "yue": "你好。", "ja": "こんにちは。", "ko": "안녕하세요."}
