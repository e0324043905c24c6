"""The control contract on `tts.control`: a client stops a request it no longer wants
(barge-in: the caller interrupted the voice agent)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar, Literal

from pydantic import AwareDatetime, Field

from streamtts.schemas.base import Contract
from streamtts.schemas.request import ID_PATTERN, TENANT_PATTERN


class ControlMessage(Contract):
    """Keyed by request_id. Every stage drops the request's remaining work; the sink reports
    what was spoken. Only the request's own tenant can cancel it (a cancel naming another
    tenant matches nothing)."""

    contract_name: ClassVar[str] = "control"

    schema_version: Literal[1] = 1
    type: Literal["cancel"] = "cancel"
    request_id: str = Field(pattern=ID_PATTERN)
    tenant: str = Field(pattern=TENANT_PATTERN)
    at: AwareDatetime
    """When the client cancelled."""
    played_ms: float | None = Field(default=None, ge=0)
    """How much of the audio the client had played when it cancelled (barge-in point); the
    result's `spoken_ms` is the smaller of this and the audio produced."""

    @classmethod
    def cancel(cls, request_id: str, tenant: str, played_ms: float | None = None) -> ControlMessage:
        return cls(request_id=request_id, tenant=tenant, at=datetime.now(UTC), played_ms=played_ms)
