"""The dead-letter contract: a record a stage could not process, with why and where from.

The same facts are also set as Kafka headers (`streamtts.dlq.*`), in the spirit of Kafka
Connect's `__connect.errors.*`, so tools can filter without parsing the value.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import AwareDatetime, Field

from streamtts.schemas.base import AudioBytes, Contract
from streamtts.schemas.names import Stage


class DeadLetter(Contract):
    contract_name: ClassVar[str] = "dead_letter"

    schema_version: Literal[1] = 1
    stage: Stage
    topic: str
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    key: str | None = None
    request_id: str | None = None
    tenant: str | None = None
    reason: str = Field(max_length=200)
    """Short cause for filtering: "invalid_json", "missing", "unknown_voice", "text_too_long", ..."""
    error_class: str
    error_message: str = Field(max_length=2000)
    attempts: int = Field(ge=1)
    first_failure_at: AwareDatetime
    failed_at: AwareDatetime
    worker_id: str
    payload: AudioBytes
    """The original record value, byte for byte (base64 in JSON)."""
