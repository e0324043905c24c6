"""Voice catalogue for the edge: validation of voice ids and the OpenAI voice-name mapping."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamtts.gateway.errors import ApiError

# OpenAI's voice names → ours. By timbre: neutral/male → en_joe (fast, native English) or
# jm_kumo (warmer, multilingual); female → jf_gongitsune (good English and Chinese), sage →
# jf_alpha. Voices that cannot speak a span's language fall back per language (reported as
# a degradation), exactly as for native requests.
OPENAI_VOICES: Mapping[str, str] = {
    "alloy": "en_joe",
    "ash": "en_joe",
    "echo": "en_joe",
    "onyx": "en_joe",
    "ballad": "jm_kumo",
    "fable": "jm_kumo",
    "verse": "jm_kumo",
    "coral": "jf_gongitsune",
    "nova": "jf_gongitsune",
    "shimmer": "jf_gongitsune",
    "sage": "jf_alpha",
}
_BLEND_PART = re.compile(r"^([A-Za-z0-9_.-]+):([0-9]*\.?[0-9]+)$")


@dataclass(frozen=True)
class VoiceCatalog:
    voices: tuple[dict[str, Any], ...]
    languages: tuple[dict[str, Any], ...] = ()
    """The language table: tag, name, tier, the voice `auto` picks, measured error."""

    @classmethod
    def load(cls) -> VoiceCatalog:
        from streamtts.processors.synthesize.registry import VoiceRegistry

        registry = VoiceRegistry(threads=1)  # describes without loading models
        return cls(tuple(registry.describe()), tuple(registry.describe_languages()))

    @property
    def ids(self) -> list[str]:
        return [v["voice_id"] for v in self.voices]

    def check(self, voice: str) -> str:
        """The voice id if the pipeline will accept it, else ApiError 400."""
        if voice == "auto" or voice in self.ids:
            return voice
        parts = voice.split("+")
        if len(parts) > 1:
            kokoro = {v["voice_id"] for v in self.voices if v["engine"] == "kokoro"}
            matches = [_BLEND_PART.match(p) for p in parts]
            if all(m and m.group(1) in kokoro and float(m.group(2)) > 0 for m in matches):
                return voice
        raise ApiError(400, "unknown_voice", f"unknown voice {voice[:60]!r}; see GET /v1/voices")

    def engine(self, voice: str) -> str:
        """The engine family that will speak `voice` (admission's cost line): a blend or
        `auto` is Kokoro's (the multilingual default), a known id its own."""
        for v in self.voices:
            if v["voice_id"] == voice:
                return str(v["engine"]).split(":", 1)[0]
        return "kokoro"

    def openai(self, name: str) -> str:
        return self.check(OPENAI_VOICES.get(name, name))
