"""The one stage seam: what the worker (readiness, supervision, lag) and the replay tooling
rely on, satisfied alike by the faust stages (`FaustStage`) and the aiokafka sink."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from streamtts.runtime.dead_letters import DeadLetterPublisher, SourceRecord
from streamtts.runtime.stage_outputs import StageOutputs
from streamtts.schemas.headers import REPLAY_STAGE, header


class DeadLettering(Protocol):
    """`Stage.dead_letter` for every stage kind: the stage only provides its publisher (which
    knows how that stage sends: a faust topic, or inside the sink's partition transaction).
    A stage subclasses it for the method; `Stage` carries it as part of the seam."""

    dead_letters: DeadLetterPublisher

    async def dead_letter(
        self,
        source: SourceRecord,
        error: BaseException,
        *,
        request_id: str | None = None,
        tenant: str | None = None,
    ) -> str:
        """Write `source` to the stage's DLQ and wait for the broker's ack; the outcome label."""
        await self.dead_letters.publish(source, error, request_id=request_id, tenant=tenant)
        return "dead_lettered"


class Stage(DeadLettering, Protocol):
    name: str
    """The stage (segment, synthesize, encode, sink): names its DLQ and its metrics."""
    group: str
    """Its consumer group's role name (e.g. "synthesize-long"); unique within a worker."""
    sources: list[str]
    """The topics it consumes."""
    assigned: bool
    """True once its group gave it partitions (readiness)."""
    outputs: StageOutputs
    """Its only way to write: what its `StageSpec` declares (see `runtime.stage_outputs`)."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...

    def failure(self) -> BaseException | None:
        """Why the stage's consuming loop died, or None while it runs (supervision)."""
        ...


@runtime_checkable
class ReportsLoad(Protocol):
    """A stage whose load goes into the worker's load report (synthesize: admission)."""

    owned: dict[str, list[int]]
    """Source topic → the partitions of it the group gives this worker now."""

    def firsts_waiting(self) -> int:
        """First spans read ahead but not yet handed to the model."""
        ...


def aimed_elsewhere(headers: object, stage: str) -> bool:
    """A replayed record addressed to another stage that reads the same topic (tts.pcm feeds
    both encode and the sink; `replay dlq --stage sink` must not re-encode)."""
    target = header(headers, REPLAY_STAGE)
    return target is not None and target != stage.encode()
