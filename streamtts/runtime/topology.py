"""The pipeline's topology, declared once: every stage, what it reads and writes, its
dead-letter topic, its consumer groups and the side services it needs.

Read `TOPOLOGY` like faust's list of `@app.agent(topic)`: the worker builds and starts exactly
these stages, `TopicNames.sources` / `is_source` (replay's re-drive check) derive from their
sources, and the topic spec (infra/topics.yaml) is checked against every topic named here.
Topics are named by role (a `TopicNames` property), so the deployment's prefix applies.

A new stage is two files: a `StageSpec` here (naming its topics, and its `build` function as
"module:function"), and its module. Its topics need no entry in infra/topics.yaml unless they
want settings of their own: `topics apply` gives the others the file's templates.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast, get_args

from streamtts.errors import ConfigError
from streamtts.schemas.names import Pool
from streamtts.schemas.release import BASE_RELEASE

if TYPE_CHECKING:
    from streamtts.runtime.stage import Stage
    from streamtts.runtime.stage_parts import StageParts
    from streamtts.runtime.topics import TopicNames

TopicRole = Literal[
    "requests",
    "utterances",
    "segments",
    "segments_long",
    "pcm",
    "audio",
    "file_parts",
    "results",
    "control",
    "lexicons",
    "config",
    "load",
]
"""A topic by what it carries; `TopicNames.role` gives its name in a deployment."""
TOPIC_ROLES: tuple[str, ...] = get_args(TopicRole)

DynamicOutput = Literal["release_lanes", "reply"]
"""release_lanes: a candidate release's lane, tts.release.NAME.segments[.long]; reply: the
request's own reply topic (never one of the pipeline's topics)."""

StageFactory = Callable[["StageParts", "StageSpec", "GroupSpec"], "Stage"]
"""Builds one consumer group's stage where its spec places it (synthesize: one per pool)."""

SideService = Literal["model", "cancels", "releases", "lexicons", "canary", "release_guard", "load_reports"]
"""A process-wide service a stage needs beside its consumer: started once per worker."""


@dataclass(frozen=True)
class GroupSpec:
    """One consumer group of a stage (synthesize has one per pool)."""

    sources: tuple[TopicRole, ...]
    """The topics the group consumes."""
    pool: Pool | None = None
    """The synthesize pool it serves; the long pool's group is named `<stage>-long`."""


@dataclass(frozen=True)
class StageSpec:
    """One stage of the data path: its consumer groups, outputs, DLQ and side services."""

    name: str
    """Names its DLQ (tts.<name>.dlq), its metrics and its consumer groups: lower-case words
    joined by "_", as the wire names it (dead letters, replay headers)."""
    groups: tuple[GroupSpec, ...]
    outputs: tuple[TopicRole, ...]
    """Topics it writes (besides its DLQ); see `dynamic` for the others. A stage can write
    nothing else (`runtime.stage_outputs`)."""
    build: str | StageFactory = ""
    """Builds one group's stage from the process's parts: "module:function", imported when a
    process runs the stage (the runtime never imports the stages it declares), or the
    function itself (a topology given as a value, e.g. in a test)."""
    warm: str = ""
    """"module:function", awaited once per process before any of its stages joins a group:
    what the stage loads for the whole process (a load holding the GIL then starves no
    started stage's heartbeats: segment's language models did, ~5 s)."""
    in_memory_needs: tuple[str, ...] = ()
    """Pieces (`StageParts.piece`) it cannot be built without in the in-memory topology
    (`processors.in_memory`), which runs it only where the caller gives them: the sink needs
    "object_store", a store in memory for its files (no S3 there)."""
    services: tuple[SideService, ...] = ()
    """Side services the stage needs in its process (see `SIDE_SERVICES` for their order)."""
    release_lanes: bool = False
    """A candidate release reads its own lane of each source (tts.release.NAME.…)."""
    dynamic: tuple[DynamicOutput, ...] = ()
    """Topics it writes that no spec file can list: per release or per request."""

    def group_role(self, group: GroupSpec, release: str = BASE_RELEASE) -> str:
        """The group's role name, unique within a worker: e.g. "synthesize-release-v2-long"."""
        lane = f"-release-{release}" if self.release_lanes and release != BASE_RELEASE else ""
        return self.name + lane + ("-long" if group.pool == "long" else "")

    def group_sources(self, group: GroupSpec, topics: TopicNames, release: str = BASE_RELEASE) -> list[str]:
        """The topics `group` consumes when serving `release`."""
        if self.release_lanes:
            return [topics.lane(role, release) for role in group.sources]
        return [topics.role(role) for role in group.sources]

    def group_for(self, pool: str | None) -> GroupSpec:
        """The group serving `pool` (None: a stage with a single group)."""
        for group in self.groups:
            if group.pool == pool:
                return group
        raise ValueError(f"stage {self.name!r} has no group for pool {pool!r}")

    def groups_for(self, pools: tuple[str, ...] | list[str]) -> list[GroupSpec]:
        """The groups a worker serving `pools` runs (a group without a pool always runs)."""
        return [g for g in self.groups if g.pool is None or g.pool in pools]

    def sources(self, topics: TopicNames, release: str = BASE_RELEASE) -> list[str]:
        """Every topic the stage consumes (all its groups) when serving `release`."""
        return [t for g in self.groups for t in self.group_sources(g, topics, release)]

    def output_topics(self, topics: TopicNames) -> list[str]:
        return [topics.role(role) for role in self.outputs]

    def dlq(self, topics: TopicNames) -> str:
        return topics.dlq(self.name)

    def factory(self) -> StageFactory:
        """The function that builds the stage (imported now if `build` names it)."""
        if callable(self.build):
            return self.build
        return cast("StageFactory", _resolve(self.build, f"stage {self.name!r}: build"))

    def warmer(self) -> Callable[[], Awaitable[None]] | None:
        """What the stage loads for the whole process, or None."""
        if not self.warm:
            return None
        return cast("Callable[[], Awaitable[None]]", _resolve(self.warm, f"stage {self.name!r}: warm"))


def _resolve(path: str, what: str) -> object:
    """The object "module:attribute" names; ConfigError naming `what` when there is none."""
    module, _, attr = path.partition(":")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as err:
        raise ConfigError(f"{what} {path!r} names nothing importable ({err})") from None
    if not callable(found):
        raise ConfigError(f"{what} {path!r} is not a function")
    return found


# fmt: off
TOPOLOGY: tuple[StageSpec, ...] = (
    # Data-path order. The worker starts stages downstream first (a stage's consumers are up
    # before it emits) and stops them upstream first (downstream drains what is in flight).
    StageSpec("segment",
              groups=(GroupSpec(("requests",)),),
              # utterances: the changelog of open streamed utterances (`segment.utterances`).
              outputs=("segments", "segments_long", "utterances"),
              build="streamtts.processors.segment.stage:build_stage",
              warm="streamtts.processors.segment.stage:warm_segmenting",
              services=("releases", "lexicons", "release_guard"),
              dynamic=("release_lanes",)),
    StageSpec("synthesize",
              groups=(GroupSpec(("segments",), pool="short"), GroupSpec(("segments_long",), pool="long")),
              outputs=("pcm",),
              build="streamtts.processors.synthesize.stage:build_stage",
              services=("model", "cancels", "canary", "load_reports"),
              release_lanes=True),
    # Encode writes each chunk's part of the stored file beside its live audio, so the sink
    # stores the frames that were streamed (one encode per request, see `schemas.chunks.FilePart`).
    StageSpec("encode",
              groups=(GroupSpec(("pcm",)),),
              outputs=("audio", "file_parts"),
              build="streamtts.processors.encode.stage:build_stage",
              dynamic=("reply",)),
    StageSpec("sink",
              groups=(GroupSpec(("file_parts",)),),
              outputs=("results",),
              build="streamtts.sinks.completion_sink:build_stage",
              in_memory_needs=("object_store",)),
)
# fmt: on

STAGES: tuple[str, ...] = tuple(spec.name for spec in TOPOLOGY)
"""The pipeline's stages, in data-path order: each has a dead-letter topic tts.<stage>.dlq."""


@dataclass(frozen=True)
class ServiceSpec:
    """A side service: the topics it follows or writes, and when it starts."""

    name: SideService
    topics: tuple[TopicRole, ...]
    before_stages: bool
    """True: the stages need it from their first record; False: it watches running stages."""


# In start order (the worker stops them in reverse).
SIDE_SERVICES: tuple[ServiceSpec, ...] = (
    # The model loads before any consumer joins: readiness says "model loading" meanwhile.
    # (A candidate release's canary reports its result on tts.config.)
    ServiceSpec("model", ("config",), before_stages=True),
    # Synthesize skips a cancelled request's segments from its first record on.
    ServiceSpec("cancels", ("control",), before_stages=True),
    # Caught up before the first request: segment routes by the rule in force, never "none".
    ServiceSpec("releases", ("config",), before_stages=True),
    # Each tenant's lexicon is loaded before segment takes a request.
    ServiceSpec("lexicons", ("lexicons",), before_stages=True),
    # The periodic canary probes the loaded model while the stages run.
    ServiceSpec("canary", (), before_stages=False),
    # Automatic rollback next to the router: it shares the router's view of the rule.
    ServiceSpec("release_guard", ("config",), before_stages=False),
    # Each synthesize worker's predicted first-span wait, for admission (gateway, submit).
    ServiceSpec("load_reports", ("load",), before_stages=False),
)


def stage_spec(name: str) -> StageSpec:
    """The spec of stage `name`; ValueError for an unknown one."""
    for spec in TOPOLOGY:
        if spec.name == name:
            return spec
    raise ValueError(f"unknown stage {name!r}; stages are {', '.join(STAGES)}")


def select(names: list[str] | tuple[str, ...]) -> list[StageSpec]:
    """The specs of `names`, in data-path order (a worker's choice of stages)."""
    for name in names:
        stage_spec(name)  # unknown names fail here
    return [spec for spec in TOPOLOGY if spec.name in names]


def services_for(specs: list[StageSpec]) -> list[ServiceSpec]:
    """The side services `specs` need, in start order."""
    needed = {s for spec in specs for s in spec.services}
    return [svc for svc in SIDE_SERVICES if svc.name in needed]


def topology_topics(topics: TopicNames) -> dict[str, str]:
    """Every topic the topology names (sources, outputs, DLQs, side services' topics) →
    who names it, e.g. "synthesize source"; what the topic spec must declare."""
    named: dict[str, str] = {}
    for spec in TOPOLOGY:
        for topic in spec.sources(topics):
            named.setdefault(topic, f"{spec.name} source")
        for topic in spec.output_topics(topics):
            named.setdefault(topic, f"{spec.name} output")
        named.setdefault(spec.dlq(topics), f"{spec.name} dead letters")
    for svc in SIDE_SERVICES:
        for role in svc.topics:
            named.setdefault(topics.role(role), f"{svc.name} service")
    return named
