"""Enumerations of the wire contracts, each defined once: stages, synthesize pools, formats.

Every other module (topics, workers, codecs, gateway, CLI) reads its choices from here, so a
new format or stage is one edit and the JSON Schemas follow.
"""

from __future__ import annotations

from typing import Literal, get_args

Stage = Literal["segment", "synthesize", "encode", "sink"]
"""The pipeline's stages, in data-path order; each has a dead-letter topic tts.<stage>.dlq."""
STAGES: tuple[str, ...] = get_args(Stage)

Pool = Literal["short", "long"]
"""Synthesize pools: interactive requests (tts.segments) and long/batch ones (tts.segments.long)."""
POOLS: tuple[str, ...] = get_args(Pool)

AudioFormat = Literal["wav", "pcm", "mp3", "opus", "flac", "mulaw", "alaw"]
"""mulaw / alaw: raw 8-bit G.711 (telephony), 8 kHz unless a rate is asked for."""
AUDIO_FORMATS: tuple[str, ...] = get_args(AudioFormat)

WavCodec = Literal["pcm_s16le", "mulaw", "alaw"]
"""What a wav file holds: 16-bit linear PCM, or G.711 μ-law / A-law (telephony file delivery)."""
WAV_CODECS: tuple[str, ...] = get_args(WavCodec)

TELEPHONY_RATE = 8000
"""Default sample rate of G.711 output (raw mulaw/alaw, or wav with a G.711 codec)."""
