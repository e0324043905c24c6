"""Versioned wire contracts of streamtts (orjson-serialized, strictly validated)."""

from schemas.base import SCHEMA_VERSION, Contract
from schemas.chunks import AudioChunk, Degradation, PcmChunk
from schemas.context import RequestContext
from schemas.dead_letter import DeadLetter
from schemas.exceptions import ContractError
from schemas.request import AUDIO_FORMATS, LANGUAGES, Delivery, TTSRequest
from schemas.result import CompletionResult, StorageRef
from schemas.segment import Segment

CONTRACTS: dict[str, type[Contract]] = {
    cls.contract_name: cls
    for cls in (TTSRequest, Segment, PcmChunk, AudioChunk, CompletionResult, DeadLetter)
}

__all__ = [
    "AUDIO_FORMATS",
    "CONTRACTS",
    "LANGUAGES",
    "SCHEMA_VERSION",
    "AudioChunk",
    "CompletionResult",
    "Contract",
    "ContractError",
    "DeadLetter",
    "Degradation",
    "Delivery",
    "PcmChunk",
    "RequestContext",
    "Segment",
    "StorageRef",
    "TTSRequest",
]
