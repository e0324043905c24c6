"""The completion result on `tts.results`: a claim check pointing at the stored file."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from streamtts.schemas.base import Contract
from streamtts.schemas.chunks import Degradation
from streamtts.schemas.request import ID_PATTERN, TENANT_PATTERN, AudioFormat


class StorageRef(BaseModel):
    """Where the assembled audio file is (object storage), and how to check it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bucket: str
    key: str
    size: int = Field(ge=0)
    etag: str
    content_type: str
    url: str | None = None
    """Presigned GET URL when the request asked for one."""


class CompletionResult(Contract):
    contract_name: ClassVar[str] = "result"

    schema_version: Literal[1] = 1
    request_id: str = Field(pattern=ID_PATTERN)
    tenant: str = Field(pattern=TENANT_PATTERN)
    status: Literal["completed", "failed"]
    format: AudioFormat
    sample_rate: int = Field(ge=8000, le=48000)
    duration_ms: float = Field(ge=0)
    chunks: int = Field(ge=0)
    storage: StorageRef | None = None
    degraded: list[Degradation] = Field(default_factory=list)
    error: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    created_at: AwareDatetime
    completed_at: AwareDatetime
