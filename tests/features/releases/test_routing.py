"""Release routing: sticky percentages, tenant lists, headers, and the rule's states."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from streamtts.features.releases.routing import BUCKETS, bucket, route
from streamtts.schemas import ReleaseConfig


def _rule(**kw: object) -> ReleaseConfig:
    base: dict[str, object] = dict(
        version=1, candidate="joe-v2", state="canary", updated_at=datetime.now(UTC)
    )
    return ReleaseConfig(**(base | kw))


def _ids(n: int) -> list[str]:
    return [uuid.UUID(int=i * 7919 + 13).hex for i in range(n)]


def test_the_bucket_is_sticky_and_depends_on_tenant_and_request() -> None:
    assert bucket("acme", "r-1") == bucket("acme", "r-1")
    assert 0 <= bucket("acme", "r-1") < BUCKETS
    spread = {bucket("acme", rid) for rid in _ids(200)}
    assert len(spread) > 190, "distinct requests land on distinct buckets"
    assert sum(bucket("acme", r) != bucket("globex", r) for r in _ids(50)) > 45


@pytest.mark.parametrize("percent", [1, 10, 50])
def test_a_percentage_sends_that_share_within_sampling_error(percent: float) -> None:
    rule = _rule(percent=percent)
    n = 20_000
    share = sum(route(rule, "acme", rid).release == "joe-v2" for rid in _ids(n)) / n
    p = percent / 100
    assert abs(share - p) < 4 * (p * (1 - p) / n) ** 0.5 + 1e-9


def test_raising_the_percentage_keeps_every_request_already_on_the_candidate() -> None:
    """Sticky: going from 5 % to 20 % only adds requests to the candidate."""
    ids = _ids(2000)
    at5 = {r for r in ids if route(_rule(percent=5), "acme", r).release == "joe-v2"}
    at20 = {r for r in ids if route(_rule(percent=20), "acme", r).release == "joe-v2"}
    assert at5 and at5 < at20


def test_zero_and_hundred_percent_are_exact() -> None:
    ids = _ids(500)
    assert all(route(_rule(percent=0, tenants=["x"]), "acme", r).release == "stable" for r in ids)
    assert all(route(_rule(percent=100), "acme", r).release == "joe-v2" for r in ids)


def test_listed_tenants_go_to_the_candidate_entirely() -> None:
    rule = _rule(percent=0, tenants=["acme"])
    assert {route(rule, "acme", r).why for r in _ids(100)} == {"tenant"}
    assert {route(rule, "globex", r).release for r in _ids(100)} == {"stable"}


def test_the_header_forces_a_lane_only_when_the_rule_allows_it() -> None:
    on, off = _rule(percent=0, header=True), _rule(percent=0, header=False)
    assert route(on, "acme", "r-1", "joe-v2").release == "joe-v2"
    assert route(on, "acme", "r-1", "joe-v2").why == "header"
    assert route(_rule(percent=100, header=True), "acme", "r-1", "stable").release == "stable"
    assert route(off, "acme", "r-1", "joe-v2").release == "stable"
    assert route(on, "acme", "r-1", "retired-v0").release == "stable", "an unknown lane is ignored"


@pytest.mark.parametrize("state", ["rolled_back", "stable"])
def test_without_a_canary_everything_goes_to_stable(state: str) -> None:
    rule = _rule(state=state, percent=100, tenants=["acme"], header=True)
    assert {route(rule, "acme", r, "joe-v2").release for r in _ids(100)} == {"stable"}


def test_after_a_promotion_the_promoted_release_serves_everything() -> None:
    rule = ReleaseConfig(version=5, stable="joe-v2", state="promoted", updated_at=datetime.now(UTC))
    assert {route(rule, "acme", r).release for r in _ids(100)} == {"joe-v2"}


def test_the_rule_rejects_inconsistent_states() -> None:
    with pytest.raises(ValueError, match="candidate"):
        ReleaseConfig(version=1, state="canary", updated_at=datetime.now(UTC))
    with pytest.raises(ValueError, match="differ"):
        ReleaseConfig(version=1, candidate="stable", state="canary", updated_at=datetime.now(UTC))
    with pytest.raises(ValueError, match="tenant"):
        _rule(tenants=["Not A Tenant"])
    with pytest.raises(ValueError):
        _rule(candidate="has.dots")  # becomes a topic name: no dots


def test_release_lanes_have_their_own_topics_and_are_replay_targets() -> None:
    from streamtts.runtime.topics import TopicNames

    t = TopicNames("p.")
    assert t.release_segments("stable") == "p.tts.segments"
    assert t.release_segments("stable", "long") == "p.tts.segments.long"
    assert t.release_segments("joe-v2") == "p.tts.release.joe-v2.segments"
    assert t.release_segments("joe-v2", "long") == "p.tts.release.joe-v2.segments.long"
    assert t.is_source("synthesize", "p.tts.release.joe-v2.segments.long")
    assert t.is_source("synthesize", "p.tts.segments")
    assert not t.is_source("synthesize", "p.tts.release.joe-v2.pcm")
    assert not t.is_source("synthesize", "p.tts.release.Bad.segments")
    assert not t.is_source("encode", "p.tts.release.joe-v2.segments")
    assert not t.is_source("synthesize", "tts.release.joe-v2.segments"), "another prefix"


def test_a_route_names_the_rule_version_that_chose_it() -> None:
    """The segment stage logs the version of the rule that routed a request: read after its
    awaits, the rule in force could already be the next one (a CI run saw a request routed to
    the candidate under v1 and logged as v2, the rollback)."""
    ids = _ids(200)
    canary = _rule(version=7, percent=50, tenants=["acme"], header=True)
    assert {route(canary, "acme", rid).rule_version for rid in ids} == {7}
    assert {route(canary, "globex", rid).rule_version for rid in ids} == {7}
    assert route(canary, "globex", ids[0], "joe-v2").rule_version == 7
    assert route(_rule(version=8, state="rolled_back"), "acme", ids[0]).rule_version == 8
