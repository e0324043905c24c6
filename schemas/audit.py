"""The audit contract on `tts.audit`: one event per gateway action or replay run.

Append-only and kept long (see infra/topics.yaml), keyed by tenant. An event names the key
by its id (the configured name or a hash prefix), never the key itself.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import ClassVar, Literal, get_args

from pydantic import AwareDatetime, Field

from streamtts.schemas.base import Contract
from streamtts.schemas.request import TENANT_PATTERN

AuditAction = Literal[
    "submit",
    "status",
    "audio_read",
    "captions_read",
    "cancel",
    "ws_open",
    "ws_close",
    "replay_dlq",
    "replay_request",
    "replay_window",
]
AUDIT_ACTIONS: tuple[str, ...] = get_args(AuditAction)

AuditSource = Literal["gateway", "replay"]


class AuditEvent(Contract):
    """What was done, by whom, from where, and how it ended.

    Refusals are events of the action that was attempted, with the reason as `outcome`:
    `unauthorized` (missing, unknown or expired key), `denied_address` (outside the key's or
    tenant's allowlist), `rate_limited`, or any other error code the gateway answered."""

    contract_name: ClassVar[str] = "audit"

    schema_version: Literal[1] = 1
    event_id: str = Field(min_length=1, max_length=64)
    at: AwareDatetime
    """When the action started."""
    source: AuditSource
    action: AuditAction
    outcome: str = Field(min_length=1, max_length=64)
    """`ok`, or why not (an error code such as `unauthorized`, `denied_address`)."""
    tenant: str | None = Field(default=None, pattern=TENANT_PATTERN)
    """None when the caller could not be identified (no or unknown key)."""
    key_id: str | None = Field(default=None, max_length=128)
    """The API key's id: its configured name or `sha256:` + 12 hex digits of it."""
    client: str | None = Field(default=None, max_length=256)
    """Client address (the socket peer, or X-Forwarded-For behind a trusted proxy); for
    replay runs, `user@host` of the operator."""
    request_id: str | None = Field(default=None, max_length=256)
    """The TTS request (or WebSocket session) the action concerns."""
    status: int | None = Field(default=None, ge=100, le=599)
    """HTTP status answered (None for WebSocket events and replay runs)."""
    bytes: int = Field(default=0, ge=0)
    """Response body bytes sent (audio and captions reads, WebSocket frames)."""
    duration_ms: float | None = Field(default=None, ge=0)
    details: dict[str, str | int] = Field(default_factory=dict, max_length=32)
    """Action specifics: a replay's filter and counts, a WebSocket close reason, ..."""

    @classmethod
    def new(cls, **fields: object) -> AuditEvent:
        return cls.model_validate({"event_id": uuid.uuid4().hex, "at": datetime.now(UTC), **fields})
