"""Release rule state changes (pure): set → promote / rollback, with versions and reasons."""

from __future__ import annotations

import pytest

from streamtts.errors import ConfigError
from streamtts.features.releases.store import promoted, rolled_back, with_canary
from streamtts.schemas import GuardLimits, ReleaseConfig


def test_set_then_rollback_keeps_the_stable_release_and_says_why() -> None:
    start = ReleaseConfig.initial()
    canary = with_canary(start, "joe-v2", percent=10, tenants=["acme"], limits=GuardLimits(min_samples=5))
    assert (canary.version, canary.state, canary.candidate, canary.percent) == (1, "canary", "joe-v2", 10)
    assert canary.routing and canary.limits.min_samples == 5
    back = rolled_back(canary, reason="degraded_rate: 100% vs 0%", by="guard")
    assert (back.version, back.state, back.stable, back.candidate) == (2, "rolled_back", "stable", "joe-v2")
    assert not back.routing and back.updated_by == "guard" and back.reason and "degraded" in back.reason
    assert back.limits == canary.limits


def test_promote_makes_the_candidate_stable() -> None:
    rule = promoted(with_canary(ReleaseConfig.initial(), "joe-v2", percent=10))
    assert (rule.stable, rule.candidate, rule.state, rule.version) == ("joe-v2", None, "promoted", 2)
    nxt = with_canary(rule, "joe-v3", percent=5)
    assert (nxt.stable, nxt.candidate) == ("joe-v2", "joe-v3")


def test_impossible_changes_are_one_line_errors() -> None:
    start = ReleaseConfig.initial()
    with pytest.raises(ConfigError, match="no candidate to promote"):
        promoted(start)
    with pytest.raises(ConfigError, match="no candidate to roll back"):
        rolled_back(start, reason="x")
    with pytest.raises(ConfigError, match="already the stable"):
        with_canary(start, "stable", percent=10)
    with pytest.raises(ConfigError):
        rolled_back(rolled_back(with_canary(start, "v2", percent=1), reason="x"), reason="again")
