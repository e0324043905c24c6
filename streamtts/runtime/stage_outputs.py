"""The one way a stage writes: to the outputs its `StageSpec` declares, and nowhere else.

Every stage (the faust ones and the sink) sends through a `StageOutputs` built from its spec;
how the bytes leave (a faust topic, the sink's partition transaction, a list in memory) is the
`Transport` the runtime gives it. A topic the spec does not declare fails at once with
`UndeclaredOutput`, before anything is sent: a stage that starts writing a new topic must say
so in the topology (and so in the topic spec), or the change does not run.

What a spec declares (see `runtime.topology`):
- `outputs`: topology roles, e.g. "pcm";
- its dead-letter topic, always;
- `dynamic`: topics no spec file can list — "release_lanes" (a candidate release's lane,
  tts.release.NAME.segments[.long]) and "reply" (the request's own reply topic: any topic that
  is not one of the pipeline's, so a reply can never land on, say, tts.results).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import StageSpec, TopicRole, stage_spec, topology_topics
from streamtts.runtime.tracing import outgoing

Headers = list[tuple[str, bytes]] | None
Transport = Callable[[str, bytes | None, bytes, Headers], Awaitable[Awaitable[Any]]]
"""Hands one record to the producer: (topic, key, value, headers) → the pending delivery
(await it for the broker's ack). Faust topics, the sink's checkpoint and memory provide one."""


class Delivered:
    """The pending delivery of a transport that waits for the ack itself (already done)."""

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # a generator: awaiting it returns at once


DELIVERED = Delivered()


class UndeclaredOutput(RuntimeError):
    """A stage wrote a topic its spec does not declare (a bug: fix the stage or the spec)."""


class StageOutputs:
    """The topics stage `stage` may write, and the send that enforces them.

    `written` counts what was sent by kind ("pcm", "dlq", "release_lane", "reply"), so a test
    can hold what a stage wrote against its spec."""

    def __init__(
        self, stage: str, topics: TopicNames, transport: Transport, spec: StageSpec | None = None
    ) -> None:
        """spec: the stage's spec where the topology given is not the pipeline's own
        (`FaustStage(spec=…)`); by default `TOPOLOGY`'s."""
        self.spec = spec or stage_spec(stage)
        self.topics = topics
        self._transport = transport
        self._declared: dict[str, str] = {topics.role(role): role for role in self.spec.outputs}
        self._declared[topics.dlq(stage)] = "dlq"
        self._pipeline = set(topology_topics(topics)) | {
            topics.replay_ledger,
            topics.audit,
        }
        self.written: Counter[str] = Counter()

    def role(self, role: TopicRole) -> str:
        """The topic of declared output `role`."""
        name = self.topics.role(role)
        if self._declared.get(name) != role:
            raise UndeclaredOutput(f"stage {self.spec.name!r} does not declare output {role!r}")
        return name

    def lane(self, release: str, pool: str) -> str:
        """A release's lane of the segments topic for `pool` (the base release: the topic)."""
        name = self.topics.release_segments(release, pool)
        self.kind(name)
        return name

    def kind(self, topic: str) -> str:
        """Which declared output `topic` is; UndeclaredOutput if none."""
        declared = self._declared.get(topic)
        if declared is not None:
            return declared
        dynamic = self.spec.dynamic
        lane = self.topics.lane_release(topic) is not None
        if "release_lanes" in dynamic and lane:
            return "release_lane"
        if "reply" in dynamic and topic not in self._pipeline and not lane:
            return "reply"
        raise UndeclaredOutput(
            f"stage {self.spec.name!r} wrote {topic!r}, which its spec does not declare "
            f"(outputs: {', '.join(self.spec.outputs) or 'none'}; dynamic: {', '.join(dynamic) or 'none'})"
        )

    async def send(
        self, topic: str, key: bytes | None, value: bytes, headers: Headers = None
    ) -> Awaitable[Any]:
        """Hand a record for `topic` to the producer; returns its pending delivery."""
        kind = self.kind(topic)
        # A dead letter keeps the failed record's headers as they were (its trace included).
        pending = await self._transport(topic, key, value, headers if kind == "dlq" else outgoing(headers))
        self.written[kind] += 1
        return pending
