"""What a client asks of one speech request (the HTTP, OpenAI-compatible and WebSocket routes
all fill it in), and the `TTSRequest` the gateway makes of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamtts.schemas import TTSRequest


@dataclass
class SpeechOptions:
    text: str
    voice: str = "auto"
    language: str = "auto"
    format: str = "mp3"
    codec: str = "pcm_s16le"
    sample_rate: int | None = None
    """None: the format's default (24000; 8000 for G.711)."""
    speed: float = 1.0
    storage: bool = True
    presign: bool = True
    namespace: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    cache: bool = True
    """Use the render cache (false: always synthesize afresh)."""
    timestamps: bool = False
    """Word timestamps on every chunk, captions stored with the audio."""
    text_type: str | None = None
    """"ssml": the text is an SSML document (checked here first: a malformed one is a 400)."""
    deadline_ms: int | None = None
    """First audio wanted within this many ms: refused with 429 `overloaded` when the
    synthesize workers' reported queue predicts it later."""
    stream: dict[str, Any] | None = None
    """A streamed utterance (`schemas.utterance.StreamOptions`): `text` is its first words,
    the rest follows as deltas (`Gateway.send_delta`)."""

    def to_request(self, tenant: str, voice: str, *, presign: bool, request_id: str | None) -> TTSRequest:
        """The request to put on `tts.requests`.

        Args:
            voice: `self.voice` as the voice catalog checked it.
            presign: whether this gateway asks for presigned URLs at all.
            request_id: the caller's id (None or empty: a new one).
        Raises:
            ContractError: the options break the request contract.
        """
        fields: dict[str, Any] = {
            "text_type": self.text_type,
            "tenant": tenant,
            "voice": voice,
            "language": self.language,
            "format": self.format,
            "codec": self.codec,
            "sample_rate": self.sample_rate,
            "speed": self.speed,
            "cache": self.cache,
            "timestamps": self.timestamps,
            "deadline_ms": self.deadline_ms,
            "metadata": {**self.metadata, "via": "gateway"},
            "delivery": {
                "chunks": True,  # the gateway streams from tts.audio
                "storage": self.storage,
                "presign": self.storage and self.presign and presign,
                "namespace": self.namespace,
            },
        }
        if request_id:
            fields["request_id"] = request_id
        if self.stream is not None:
            fields["stream"] = self.stream
        return TTSRequest.new(self.text, **fields)
