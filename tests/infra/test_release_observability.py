"""Gray releases are visible: an alert per candidate lane and a dashboard row per release."""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml

INFRA = Path(__file__).resolve().parents[2] / "infra"


def test_alert_rules_compare_each_candidate_with_stable() -> None:
    doc = yaml.safe_load((INFRA / "observability" / "alerts.yml").read_text())
    group = next(g for g in doc["groups"] if g["name"] == "streamtts.releases")
    rules = {r["alert"]: r["expr"] for r in group["rules"]}
    assert "streamtts_release_rollbacks_total" in rules["StreamttsReleaseRolledBack"]
    for name in ("StreamttsCandidateErrorRateAboveStable", "StreamttsCandidateDegradedAboveStable"):
        expr = rules[name]
        assert 'release!="stable"' in expr and 'release="stable"' in expr and "by (release)" in expr
    assert "streamtts_release_first_audio_seconds_bucket" in rules["StreamttsCandidateFirstAudioSlow"]
    assert "streamtts_release_info" in rules["StreamttsCandidateCanaryFailing"]


def test_the_dashboard_repeats_a_row_of_panels_per_release() -> None:
    dash = orjson.loads((INFRA / "observability" / "grafana-dashboard.json").read_bytes())
    assert any(v["name"] == "release" for v in dash["templating"]["list"])
    panels = dash["panels"]
    row = next(i for i, p in enumerate(panels) if p["type"] == "row" and p.get("repeat") == "release")
    below = panels[row + 1 :]
    assert len(below) >= 4 and all("$release" in p["title"] for p in below)
    assert all('release=~"$release"' in p["targets"][0]["expr"] for p in below)
