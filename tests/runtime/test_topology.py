"""Every stage's topics come from one declaration (`runtime.topology`): the topic spec, the
worker and replay's re-drive check agree with it."""

from __future__ import annotations

import itertools
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, cast, get_args

import pytest

from streamtts.errors import ConfigError
from streamtts.infra.topics import load_spec, topology_gaps
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, S3Settings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import (
    SIDE_SERVICES,
    STAGES,
    TOPOLOGY,
    GroupSpec,
    SideService,
    StageSpec,
    topology_topics,
)
from streamtts.schemas.names import POOLS
from streamtts.worker import SIDE_SERVICE_STARTERS, Worker
from streamtts.worker_services import stage_parts

PREFIX = "p."
TOPICS = TopicNames(PREFIX)
CANDIDATE = "joe-v2"


def _settings() -> Settings:
    return Settings(
        kafka=KafkaSettings(bootstrap_servers="127.0.0.1:1", topic_prefix=PREFIX), s3=S3Settings()
    )


def _selections() -> list[tuple[str, ...]]:
    return [c for n in range(1, len(STAGES) + 1) for c in itertools.combinations(STAGES, n)]


def test_the_topology_lists_every_stage_once_in_data_path_order() -> None:
    assert tuple(spec.name for spec in TOPOLOGY) == STAGES
    named = {svc.name for svc in SIDE_SERVICES}
    assert named == set(get_args(SideService))
    for spec in TOPOLOGY:
        assert spec.groups and set(spec.services) <= named, spec.name
        roles = [spec.group_role(g) for g in spec.groups]
        assert len(set(roles)) == len(roles), f"{spec.name}: group roles must be unique"


def test_topics_yaml_declares_every_topic_the_topology_names_with_sane_settings() -> None:
    specs = load_spec(prefix=PREFIX)
    declared = {s.name: s for s in specs}
    named = topology_topics(TOPICS)
    for spec in TOPOLOGY:  # sources, outputs and DLQs are all among what must be declared
        assert {*spec.sources(TOPICS), *spec.output_topics(TOPICS), spec.dlq(TOPICS)} <= set(named)
    assert set(named) <= set(declared), sorted(set(named) - set(declared))
    assert topology_gaps(specs, TOPICS) == []
    # Release lanes are created with the spec of the base segments topics: both are there.
    assert {TOPICS.lane("segments", "stable"), TOPICS.lane("segments_long", "stable")} <= set(declared)


def test_a_stage_added_to_the_topology_gets_its_topics_from_the_templates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new stage is its spec and its module: its dead letters and its new topic need no
    entry in infra/topics.yaml, and the worker builds it from its spec's `build`."""
    import streamtts.runtime.topology as topology

    raw = cast(Any, "pcm_raw")
    synthesize = replace(topology.stage_spec("synthesize"), outputs=(raw,))
    attenuate = StageSpec(
        "attenuate",
        groups=(GroupSpec((raw,)),),
        outputs=("pcm",),
        build="streamtts.processors.encode.stage:build_stage",  # any importable builder
    )
    grown = tuple(
        s for spec in TOPOLOGY for s in ((synthesize, attenuate) if spec.name == "synthesize" else (spec,))
    )
    monkeypatch.setattr(topology, "TOPOLOGY", grown)
    declared = {s.name: s for s in load_spec(prefix=PREFIX)}
    dlq, new = declared[TOPICS.dlq("attenuate")], declared[TOPICS.role(raw)]
    assert new.name == "p.tts.pcm.raw" and new.partitions == 6
    assert new.configs["retention.ms"] == "86400000"
    assert dlq.partitions == 1 and dlq.configs["retention.ms"] == "2592000000"
    assert dlq.configs["max.message.bytes"] == declared[TOPICS.dlq("sink")].configs["max.message.bytes"]
    assert topology_gaps(list(declared.values()), TOPICS) == []
    assert declared[TOPICS.pcm].configs["retention.ms"] == "21600000", "a listed topic keeps its own"


def test_the_topic_check_finds_a_missing_topic_and_a_dead_letter_topic_too_small() -> None:
    specs = load_spec(prefix=PREFIX)
    without_pcm = [s for s in specs if s.name != TOPICS.pcm]
    assert f"{TOPICS.pcm}: not declared (synthesize output)" in topology_gaps(without_pcm, TOPICS)
    small = [
        replace(s, configs={**s.configs, "max.message.bytes": "1000", "retention.ms": "1000"})
        if s.name == TOPICS.dlq("sink")
        else s
        for s in specs
    ]
    gaps = topology_gaps(small, TOPICS)
    assert f"{TOPICS.dlq('sink')}: max.message.bytes below its source {TOPICS.file_parts}'s" in gaps
    assert f"{TOPICS.dlq('sink')}: retention.ms shorter than its source {TOPICS.file_parts}'s" in gaps


def test_every_stage_names_a_build_function_and_every_side_service_has_its_starter() -> None:
    for spec in TOPOLOGY:
        assert callable(spec.factory()), spec.name
        assert spec.warm == "" or callable(spec.warmer()), spec.name
    assert set(SIDE_SERVICE_STARTERS) == {svc.name for svc in SIDE_SERVICES}


def test_a_build_path_that_names_nothing_is_a_clear_error() -> None:
    spec = replace(TOPOLOGY[0], build="streamtts.processors.segment.stage:no_such_function")
    with pytest.raises(ConfigError, match=r"stage 'segment': build .*no_such_function.* names nothing"):
        spec.factory()
    with pytest.raises(ConfigError, match="names nothing importable"):
        replace(TOPOLOGY[0], warm="streamtts.no_such_module:warm").warmer()


@pytest.mark.parametrize("pools", [("short",), ("long",), POOLS])
def test_the_worker_runs_exactly_the_groups_of_the_chosen_stages(pools: tuple[str, ...]) -> None:
    for chosen in _selections():
        worker = Worker(list(reversed(chosen)), _settings(), PipelineSettings(), pools=pools, ops=False)
        expected = [
            (spec.name, g.pool)
            for spec in reversed(TOPOLOGY)
            if spec.name in chosen
            for g in spec.groups
            if g.pool is None or g.pool in pools
        ]
        assert [(s.name, g.pool) for s, g in worker.stage_groups()] == expected, chosen
        needed = {svc for spec in TOPOLOGY if spec.name in chosen for svc in spec.services}
        assert [svc.name for svc in worker.side_services] == [
            s.name for s in SIDE_SERVICES if s.name in needed
        ]


@pytest.mark.parametrize("release", ["stable", CANDIDATE])
async def test_each_built_stage_has_the_group_sources_and_dlq_of_its_spec(release: str) -> None:
    renderer: Any = SimpleNamespace(synth=SimpleNamespace(registry=SimpleNamespace()))
    pipeline = PipelineSettings.of(release=release)
    worker = Worker(list(STAGES), _settings(), pipeline, renderer=renderer, ops=False)
    built = [
        (spec, group, spec.factory()(stage_parts(worker), spec, group))
        for spec, group in worker.stage_groups()
    ]
    assert len(built) == sum(len(spec.groups) for spec in TOPOLOGY)
    for spec, group, stage in built:
        assert stage.name == spec.name
        assert stage.group == spec.group_role(group, release)
        assert stage.sources == spec.group_sources(group, TOPICS, release)
        assert stage.dead_letters.topic == TOPICS.dlq(spec.name)
    groups = {stage.group: stage.sources for _, _, stage in built}
    if release == CANDIDATE:  # a candidate's synthesize groups read its own lanes
        assert groups["synthesize-release-joe-v2"] == ["p.tts.release.joe-v2.segments"]
        assert groups["synthesize-release-joe-v2-long"] == ["p.tts.release.joe-v2.segments.long"]
    else:
        assert groups["synthesize"] == ["p.tts.segments"]
        assert groups["synthesize-long"] == ["p.tts.segments.long"]
    assert groups["segment"] == ["p.tts.requests"] and groups["encode"] == ["p.tts.pcm"]
    assert groups["sink"] == ["p.tts.file.parts"]
    for _, _, stage in built:  # built, never started: nothing is held (the sink joins at start)
        assert getattr(stage, "consumer", None) is None


def test_replays_source_check_agrees_with_the_specs() -> None:
    named = set(topology_topics(TOPICS))
    for spec in TOPOLOGY:
        sources = set(spec.sources(TOPICS))
        assert TOPICS.sources(spec.name) == spec.sources(TOPICS)
        for topic in named:  # every topic the pipeline knows: a source or foreign, per spec
            assert TOPICS.is_source(spec.name, topic) == (topic in sources), (spec.name, topic)
        for group in spec.groups:
            if spec.release_lanes:
                lane = spec.group_sources(group, TOPICS, CANDIDATE)
                assert lane and all(TOPICS.is_source(spec.name, t) for t in lane), lane
            else:  # a stage without lanes never takes a lane's name for its own
                assert not TOPICS.is_source(spec.name, f"{PREFIX}tts.release.{CANDIDATE}.segments")
    assert not TOPICS.is_source("synthesize", f"{PREFIX}tts.release.{CANDIDATE}.pcm")
    assert not TOPICS.is_source("synthesize", f"tts.release.{CANDIDATE}.segments"), "another prefix"


async def test_start_order_is_prerequisites_then_stages_downstream_first_then_watchers_and_stop_unwinds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []

    class FakeStage:
        def __init__(self, group: str) -> None:
            self.name = self.group = group
            self.sources: list[str] = []
            self.assigned = True

        async def start(self) -> None:
            events.append(f"start {self.group}")

        async def stop(self) -> None:
            events.append(f"stop {self.group}")

        def failure(self) -> None:
            return None

    def fake(self: StageSpec) -> Any:
        return lambda parts, spec, g: FakeStage(spec.name + ("-long" if g.pool == "long" else ""))

    monkeypatch.setattr(StageSpec, "factory", fake)
    for svc in SIDE_SERVICE_STARTERS:

        async def start(worker: Worker, svc: str = svc) -> None:
            events.append(f"start {svc}")

            async def stop() -> None:
                events.append(f"stop {svc}")

            worker._on_stop(svc, stop)

        monkeypatch.setitem(SIDE_SERVICE_STARTERS, svc, start)
    worker = Worker(list(STAGES), _settings(), PipelineSettings(), ops=False)
    await worker.start()
    started = list(events)
    assert started == [
        "start model",
        "start cancels",
        "start releases",
        "start lexicons",
        "start sink",
        "start encode",
        "start synthesize",
        "start synthesize-long",
        "start segment",
        "start canary",
        "start release_guard",
        "start load_reports",
    ]
    events.clear()
    await worker.stop()
    assert events == [e.replace("start", "stop") for e in reversed(started)]
    assert worker.services == []
    events.clear()
    await worker.stop()
    assert events == [], "a second stop has nothing left to stop"
