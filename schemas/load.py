"""The load report contract on `tts.load` (compacted, keyed by worker): what a synthesize
worker predicts a new request's first span would wait, so admission can refuse a request
whose deadline cannot be met instead of letting it queue until it is useless."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from streamtts.schemas.base import Contract
from streamtts.schemas.release import RELEASE_PATTERN

WORKER_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"


class CostLine(BaseModel):
    """An engine family's fitted compute of one span: intercept + slope × phonemes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    intercept_ms: float = Field(ge=0)
    ms_per_phoneme: float = Field(ge=0)
    phonemes_per_char: float = Field(ge=0)
    runs: int = Field(ge=0)
    """Measured runs behind the fit (0: the machine-class prior alone)."""


class LoadReport(Contract):
    """One synthesize worker's view of its own queue, published every `interval_s`."""

    contract_name: ClassVar[str] = "load_report"

    schema_version: Literal[1] = 1
    worker: str = Field(pattern=WORKER_PATTERN)
    """host:pid of the worker (the record key)."""
    release: str = Field(pattern=RELEASE_PATTERN)
    partitions: dict[str, list[int]] = Field(default_factory=dict, max_length=64)
    """Source topic → the partitions of it this worker owns: a request keyed to one of them
    has its first span queued here."""
    first_wait_ms: float | None = Field(default=None, ge=0)
    """Predicted wait of a first span submitted now (None: this worker's scheduler makes no
    prediction, e.g. `scheduler = "fifo"`)."""
    queued_first: int = Field(default=0, ge=0)
    queued_bulk: int = Field(default=0, ge=0)
    slots: int = Field(default=1, ge=1)
    cost: dict[str, CostLine] = Field(default_factory=dict, max_length=32)
    """Engine family ("kokoro", "piper", "formant") → its fitted cost line."""
    interval_s: float = Field(gt=0, le=3600)
    """How often the worker reports: a report older than a few intervals is stale."""
    at: AwareDatetime
