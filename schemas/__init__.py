"""Versioned wire contracts of streamtts (orjson-serialized, strictly validated)."""

from streamtts.schemas.audit import AuditEvent
from streamtts.schemas.base import SCHEMA_VERSION, Contract
from streamtts.schemas.chunks import AudioChunk, Degradation, FilePart, PcmChunk, WordTiming
from streamtts.schemas.context import RequestContext
from streamtts.schemas.control import ControlMessage
from streamtts.schemas.dead_letter import DeadLetter
from streamtts.schemas.exceptions import ContractError
from streamtts.schemas.lexicon import Lexicon, LexiconEntry
from streamtts.schemas.load import LoadReport
from streamtts.schemas.release import CanaryReport, GuardLimits, ReleaseConfig
from streamtts.schemas.request import LANGUAGES, Delivery, TTSRequest
from streamtts.schemas.result import Captions, CompletionResult, StorageRef
from streamtts.schemas.segment import Segment
from streamtts.schemas.utterance import StreamOptions, TextDelta

CONTRACTS: dict[str, type[Contract]] = {
    cls.contract_name: cls
    for cls in (
        TTSRequest,
        TextDelta,
        Segment,
        PcmChunk,
        AudioChunk,
        FilePart,
        CompletionResult,
        ControlMessage,
        Lexicon,
        AuditEvent,
        ReleaseConfig,
        CanaryReport,
        LoadReport,
    )
}

__all__ = [
    "CONTRACTS",
    "LANGUAGES",
    "SCHEMA_VERSION",
    "AudioChunk",
    "AuditEvent",
    "CanaryReport",
    "Captions",
    "CompletionResult",
    "Contract",
    "ContractError",
    "ControlMessage",
    "DeadLetter",
    "Degradation",
    "Delivery",
    "FilePart",
    "GuardLimits",
    "Lexicon",
    "LexiconEntry",
    "LoadReport",
    "PcmChunk",
    "ReleaseConfig",
    "RequestContext",
    "Segment",
    "StorageRef",
    "StreamOptions",
    "TTSRequest",
    "TextDelta",
    "WordTiming",
]
