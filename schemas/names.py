"""Enumerations of the wire contracts, each defined once: synthesize pools, formats, codecs.

Every other module (topics, workers, gateway, CLI) reads its choices from here, and the JSON
Schemas follow. Audio formats are the codec registry's
(`streamtts.audio.formats`): a field typed `AudioFormat` accepts exactly the registered names,
and its JSON Schema enum lists them, so a new format is one `formats.register(...)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from streamtts.audio import formats

STAGE_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
"""How the wire names a stage (dead letters, replay headers) and a topic role: lower-case words
joined by "_". Which stages exist is the topology's (`streamtts.runtime.topology.STAGES`)."""

Pool = Literal["short", "long"]
"""Synthesize pools: interactive requests (tts.segments) and long/batch ones (tts.segments.long)."""
POOLS: tuple[str, ...] = get_args(Pool)


class RegisteredFormat:
    """Pydantic type of a format field: one of the codec registry's names at validation time
    (as strict as a Literal: exact, case-sensitive, the same `literal_error`), and a JSON
    Schema enum of the names registered when the schema is generated."""

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(_registered, core_schema.str_schema(strict=True))

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"enum": list(formats.names()), "type": "string"}


def _registered(value: str) -> str:
    if formats.find(value) is None:
        expected = " or ".join(", ".join(repr(n) for n in formats.names()).rsplit(", ", 1))
        raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})
    return value


@dataclass(frozen=True)
class OneOf:
    """Pydantic metadata of a text field that must be one of `values` (a table's tags): a
    value error "unknown {what} …" (then `hint`) otherwise, and a JSON Schema enum of them.

    `Annotated[str, OneOf(TAGS, "run language")]`."""

    values: tuple[str, ...]
    what: str
    hint: str = ""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._known, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "enum": list(self.values)}

    def _known(self, value: str) -> str:
        if value not in self.values:
            raise ValueError(f"unknown {self.what} {value!r}" + (f"; {self.hint}" if self.hint else ""))
        return value


AudioFormat = Annotated[str, RegisteredFormat]
"""A registered audio format (`streamtts.audio.formats.names()`); mulaw / alaw: raw 8-bit
G.711 (telephony), 8 kHz unless a rate is asked for."""

WavCodec = Literal["pcm_s16le", "mulaw", "alaw"]
"""What a wav file holds: 16-bit linear PCM, or G.711 μ-law / A-law (telephony file delivery)."""
WAV_CODECS: tuple[str, ...] = get_args(WavCodec)
