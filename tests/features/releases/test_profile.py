"""A release's voice mapping applied to segments (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from streamtts.errors import ConfigError
from streamtts.features.releases.profile import ReleaseProfile
from streamtts.runtime.pipeline_settings import PipelineSettings, voice_map
from streamtts.schemas import RequestContext, Segment, TTSRequest


def _segment(voice: str = "en_joe", planned: str | None = None) -> Segment:
    request = TTSRequest.new("Hello there.", language="en", voice=voice)
    return Segment(
        request_id=request.request_id,
        seq=0,
        total=1,
        last=True,
        text="Hello there.",
        lang="en",
        voice=planned,
        request=RequestContext.of(request),
        segmented_at=datetime.now(UTC),
    )


def test_the_requested_and_planned_voices_are_mapped() -> None:
    profile = ReleaseProfile("kumo-v2", {"jm_kumo": "jm_kumo:0.8+jf_alpha:0.2", "en_joe": "jm_kumo"})
    out = profile.apply(_segment("en_joe"))
    assert out.request.voice == "jm_kumo" and out.voice is None
    auto = profile.apply(_segment("auto", planned="jm_kumo"))
    assert auto.request.voice == "auto" and auto.voice == "jm_kumo:0.8+jf_alpha:0.2"
    untouched = _segment("jf_alpha")
    assert profile.apply(untouched) is untouched
    assert ReleaseProfile().apply(untouched) is untouched


def test_release_settings_are_validated() -> None:
    assert voice_map(("a=b", " c = d ")) == {"a": "b", "c": "d"}
    with pytest.raises(ConfigError, match="RELEASE_VOICES"):
        PipelineSettings.of(release_voices=("just-a-voice",))
    with pytest.raises(ConfigError, match="RELEASE"):
        PipelineSettings.of(release="Bad.Name")
