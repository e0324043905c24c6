"""The release contract on `tts.config` (compacted, key "release"): which synthesize release
serves which requests, and the limits the release guard holds a candidate to.

A release is a named synthesize configuration (model/voice pack version, inference settings)
served by its own consumer group from its own segments topics. The record is rewritten whole
on every change (`streamtts release set|promote|rollback`, the guard's automatic rollback);
the newest record is the routing rule.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import ClassVar, Literal, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from streamtts.schemas.base import Contract
from streamtts.schemas.request import TENANT_PATTERN

RELEASE_PATTERN = r"^[a-z0-9][a-z0-9-]{0,39}$"
"""Release names become topic and consumer-group names: short, lower case, no dots."""
BASE_RELEASE = "stable"
"""The release served from today's topics (tts.segments, tts.segments.long) and groups."""
RELEASE_KEY = b"release"
"""The one key of the routing rule on the compacted config topic."""
CANARY_KEY_PREFIX = b"canary/"
"""Keys `canary/<release>/<worker>` on the config topic: each worker's latest canary state."""

MAX_RELEASE_VERSION = 2**63 - 1
"""A signed 64-bit integer: what every consumer (orjson, a JVM `long`) can carry. A record
past it would make the next writer's increment unwritable."""

_TENANT = re.compile(TENANT_PATTERN)

ReleaseState = Literal["stable", "canary", "promoted", "rolled_back"]


class GuardLimits(BaseModel):
    """What a candidate may do worse than stable before the guard rolls it back."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_samples: int = Field(default=20, ge=1, le=100_000)
    """Completed candidate requests (and as many stable ones) before any comparison."""
    window: int = Field(default=200, ge=1, le=100_000)
    """Most recent outcomes per release that are compared."""
    max_error_rate_increase: float = Field(default=0.02, ge=0, le=1)
    """Candidate failed-request rate may exceed stable's by this much (absolute)."""
    max_degraded_rate_increase: float = Field(default=0.05, ge=0, le=1)
    """Candidate degraded-request rate may exceed stable's by this much (absolute)."""
    max_first_audio_p99_ratio: float = Field(default=1.5, ge=1)
    """Candidate P99 first audio may be this many times stable's ..."""
    first_audio_slack_ms: float = Field(default=200.0, ge=0)
    """... plus this much (small absolute differences on fast paths are noise, not a breach)."""
    canary: bool = True
    """A failing canary on a candidate worker is a breach."""
    max_pending_s: float = Field(default=120.0, gt=0)
    """A request routed to the candidate with no result after this long is a breach (a
    candidate with no workers, or stuck, renders nothing and so never fails a rate)."""


class ReleaseConfig(Contract):
    """The routing rule: a sticky percentage, a tenant list, or a request header picks the
    candidate; everything else goes to stable."""

    contract_name: ClassVar[str] = "release"

    schema_version: Literal[1] = 1
    version: int = Field(ge=0, le=MAX_RELEASE_VERSION)
    """Incremented by every writer; readers follow the newest record on the topic."""
    stable: str = Field(default=BASE_RELEASE, pattern=RELEASE_PATTERN)
    candidate: str | None = Field(default=None, pattern=RELEASE_PATTERN)
    state: ReleaseState = "stable"
    percent: float = Field(default=0.0, ge=0, le=100)
    """Share of requests sent to the candidate, sticky by hash of tenant and request id."""
    tenants: list[str] = Field(default_factory=list, max_length=1000)
    """These tenants' requests all go to the candidate."""
    header: bool = False
    """Honour the `x-streamtts-release` request header (a named release forces that lane)."""
    limits: GuardLimits = Field(default_factory=GuardLimits)
    reason: str | None = Field(default=None, max_length=500)
    """Why the last change was made (a rollback says which limit was breached)."""
    updated_by: str = Field(default="cli", max_length=100)
    updated_at: AwareDatetime

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.state == "canary" and self.candidate is None:
            raise ValueError("a canary needs a candidate")
        if self.candidate is not None and self.candidate == self.stable:
            raise ValueError("the candidate must differ from the stable release")
        for tenant in self.tenants:
            if not _TENANT.match(tenant):
                raise ValueError(f"tenant {tenant!r} is not a valid tenant id")
        return self

    @property
    def routing(self) -> bool:
        """Whether any request can reach the candidate now."""
        return self.state == "canary" and self.candidate is not None

    @classmethod
    def initial(cls) -> ReleaseConfig:
        """What holds before anyone wrote a rule: everything on the base release."""
        return cls(version=0, updated_by="default", updated_at=datetime.now(UTC))


class CanaryReport(Contract):
    """A synthesize worker's canary state, on `tts.config` under `canary/<release>/<worker>`:
    written when it changes, so the release guard can judge a candidate by its canary."""

    contract_name: ClassVar[str] = "canary_report"

    schema_version: Literal[1] = 1
    release: str = Field(pattern=RELEASE_PATTERN)
    worker: str = Field(min_length=1, max_length=200)
    ok: bool
    reason: str | None = Field(default=None, max_length=500)
    at: AwareDatetime

    @property
    def key(self) -> bytes:
        return CANARY_KEY_PREFIX + f"{self.release}/{self.worker}".encode()
