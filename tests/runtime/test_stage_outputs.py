"""A stage writes only what its `StageSpec` declares: anything else fails at once, unsent."""

from __future__ import annotations

from typing import Any

import pytest

from streamtts.runtime.stage_outputs import DELIVERED, StageOutputs, UndeclaredOutput
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.topics import TopicNames

TOPICS = TopicNames("t.")


def _outputs(stage: str) -> tuple[StageOutputs, list[str]]:
    sent: list[str] = []

    async def transport(topic: str, key: bytes | None, value: bytes, headers: Any) -> Any:
        sent.append(topic)
        return DELIVERED

    return StageOutputs(stage, TOPICS, transport), sent


@pytest.mark.parametrize(
    ("stage", "topic"),
    [
        ("segment", TOPICS.pcm),  # skipping a stage
        ("segment", TOPICS.results),
        ("synthesize", TOPICS.audio),
        ("synthesize", TOPICS.release_segments("canary")),  # a lane is segment's to write
        ("encode", TOPICS.results),  # a pipeline topic is no reply topic
        ("encode", TOPICS.requests),
        ("encode", TOPICS.dlq("sink")),  # another stage's dead letters
        ("sink", TOPICS.pcm),
        ("sink", "t.replies.client-1"),  # only encode answers on reply topics
        ("segment", "t.replies.client-1"),
    ],
)
async def test_a_stage_writing_a_topic_its_spec_does_not_declare_fails_unsent(stage: str, topic: str) -> None:
    outputs, sent = _outputs(stage)
    with pytest.raises(UndeclaredOutput, match=stage):
        await outputs.send(topic, b"k", b"v")
    assert sent == [] and not outputs.written


@pytest.mark.parametrize(
    ("stage", "topic", "kind"),
    [
        ("segment", TOPICS.segments, "segments"),
        ("segment", TOPICS.segments_long, "segments_long"),
        ("segment", TOPICS.release_segments("canary-2", "long"), "release_lane"),
        ("segment", TOPICS.dlq("segment"), "dlq"),
        ("synthesize", TOPICS.pcm, "pcm"),
        ("encode", TOPICS.audio, "audio"),
        ("encode", "t.replies.client-1", "reply"),
        ("sink", TOPICS.results, "results"),
        ("sink", TOPICS.dlq("sink"), "dlq"),
    ],
)
async def test_declared_outputs_are_sent_and_counted_by_kind(stage: str, topic: str, kind: str) -> None:
    outputs, sent = _outputs(stage)
    await (await outputs.send(topic, b"k", b"v"))
    assert sent == [topic] and outputs.written == {kind: 1}


def test_a_role_the_stage_does_not_declare_is_refused_by_name() -> None:
    outputs, _ = _outputs("synthesize")
    assert outputs.role("pcm") == TOPICS.pcm
    with pytest.raises(UndeclaredOutput, match="'audio'"):
        outputs.role("audio")
    with pytest.raises(UndeclaredOutput):
        outputs.lane("canary", "short")  # synthesize has no lanes to write


@pytest.mark.parametrize("role", ["replay_ledger", "audit", "encode_dlq", "release_v2_segments"])
def test_a_new_role_never_names_a_topic_the_pipeline_has(role: str) -> None:
    with pytest.raises(ValueError, match="has already"):
        TOPICS.role(role)  # type: ignore[arg-type]
    assert TOPICS.role("pcm_raw") == TOPICS.prefix + "tts.pcm.raw"  # type: ignore[arg-type]


def test_only_the_synthesize_stage_reports_its_waiting_first_spans() -> None:
    from streamtts.processors.encode.stage import EncodeStage
    from streamtts.runtime.stage import ReportsLoad

    encode = EncodeStage(StageParts.of())
    try:
        assert not isinstance(encode, ReportsLoad), "encode's queue is not the model's: not admission's"
    finally:
        encode.release()
