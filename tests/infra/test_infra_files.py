"""Shipped operations files parse, reference only metrics we export, and probe the right paths."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from streamtts.errors import ConfigError
from streamtts.runtime.config_file import apply_config, load_config_file
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.telemetry import Telemetry

INFRA = Path(__file__).resolve().parents[2] / "infra"
METRIC = re.compile(r"\bstreamtts_[a-z_]+\b")
KNOWN = Telemetry().metric_names()


def _check_expr(expr: str) -> None:
    assert expr.count("(") == expr.count(")") and expr.count("[") == expr.count("]"), expr
    names = set(METRIC.findall(expr))
    assert names, f"no streamtts metric in {expr!r}"
    assert names <= KNOWN, f"unknown metrics {names - KNOWN} in {expr!r}"


def test_alert_rules_cover_the_on_call_cases_with_real_metrics() -> None:
    doc = yaml.safe_load((INFRA / "observability" / "alerts.yml").read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}
        assert re.fullmatch(r"\d+[smh]", rule["for"])
        _check_expr(rule["expr"])
    exprs = {r["alert"]: r["expr"] for r in rules}
    assert "> 1.2" in exprs["StreamttsTimeToFirstAudioP99High"]  # the P99 target
    for needed in (
        "StreamttsDeadLettersRising",
        "StreamttsBreakerOpen",
        "StreamttsConsumerLagGrowing",
        "StreamttsCanaryFailing",
    ):
        assert needed in exprs


def test_prometheus_config_scrapes_metrics_and_loads_the_rules() -> None:
    doc = yaml.safe_load((INFRA / "observability" / "prometheus.yml").read_text())
    assert all((INFRA / "observability" / f).exists() for f in doc["rule_files"])
    assert {j["metrics_path"] for j in doc["scrape_configs"]} == {"/metrics"}


def test_dashboard_panels_query_exported_metrics() -> None:
    dash = orjson.loads((INFRA / "observability" / "grafana-dashboard.json").read_bytes())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    for expr in exprs:
        _check_expr(expr)
    covered = set().union(*(METRIC.findall(e) for e in exprs))
    assert {
        "streamtts_time_to_first_audio_seconds_bucket",
        "streamtts_consumer_lag",
        "streamtts_breaker_state",
    } <= covered


def test_kubernetes_workers_probe_health_and_readiness_and_config_loads(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all((INFRA / "k8s" / "streamtts.yaml").read_text()))
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert {d["metadata"]["labels"]["app.kubernetes.io/component"] for d in deployments} == {
        "segment",
        "synthesize-short",
        "synthesize-long",
        "encode",
        "sink",
    }
    for d in deployments:
        c = d["spec"]["template"]["spec"]["containers"][0]
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > 30
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["config.toml"]
    path = tmp_path / "config.toml"
    path.write_text(config)
    values = load_config_file(path)
    assert values["STREAMTTS_OPS_PORT"] == "9464" and values["STREAMTTS_WARM_VOICES"] == "jm_kumo,en_joe"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[pipeline]\nfoo = 1\n", "unknown key 'pipeline.foo'"),
        ('[pipeline]\nmax_chars = "many"\n', "pipeline.max_chars must be an integer"),
        ('[s3]\nsecret_key = "hunter2"\n', "s3.secret_key is a secret"),
        ("[pipeline\n", "is not valid TOML"),
    ],
)
def test_bad_config_fails_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config_file(path)


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("pipeline:\n  first_max_chars: 30\n  max_chars: 120\n")
    env = {"STREAMTTS_MAX_CHARS": "200"}
    applied = apply_config(path, env)
    assert applied == {"STREAMTTS_FIRST_MAX_CHARS": "30"}
    assert env == {"STREAMTTS_MAX_CHARS": "200", "STREAMTTS_FIRST_MAX_CHARS": "30"}


@pytest.mark.parametrize(("raw", "spin"), [("", False), ("1", True), ("true", True), ("off", False)])
def test_synth_spin_reads_booleans(monkeypatch: pytest.MonkeyPatch, raw: str, spin: bool) -> None:
    monkeypatch.setenv("STREAMTTS_SYNTH_SPIN", raw)
    assert PipelineSettings.from_env().synthesis.spin is spin


def test_a_bad_boolean_names_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STREAMTTS_SYNTH_SPIN", "maybe")
    with pytest.raises(ConfigError, match="STREAMTTS_SYNTH_SPIN must be true or false"):
        PipelineSettings.from_env()
    path = tmp_path / "c.toml"
    path.write_text("[pipeline]\nsynth_spin = 1\n")
    with pytest.raises(ConfigError, match=re.escape("pipeline.synth_spin must be true or false")):
        load_config_file(path)


def test_config_show_prints_a_file_that_loads_back_with_secrets_masked(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "STREAMTTS_KAFKA_BOOTSTRAP": "kafka-1:9093",
        "STREAMTTS_KAFKA_SASL_PASSWORD": "sasl-hunter2",
        "STREAMTTS_S3_ENDPOINT": "https://s3.example.com",
        "STREAMTTS_S3_SECRET_KEY": "s3-hunter2",
        "STREAMTTS_MAX_CHARS": "120",
        "STREAMTTS_SYNTH_SPIN": "1",
        "STREAMTTS_WARM_VOICES": "en_joe,jm_kumo",
        "STREAMTTS_MARKUP": "strip",
        "STREAMTTS_LOG_LEVEL": "DEBUG",
    }
    shown = subprocess.run(
        [sys.executable, "-m", "streamtts.cli.main", "config", "show"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    ).stdout
    assert "hunter2" not in shown and "STREAMTTS_S3_SECRET_KEY" in shown
    path = tmp_path / "shown.toml"
    path.write_text(shown)
    loaded = load_config_file(path)
    secrets = {"STREAMTTS_KAFKA_SASL_PASSWORD", "STREAMTTS_S3_SECRET_KEY", "PATH"}
    expected = {k: v for k, v in env.items() if k not in secrets}
    assert {k: loaded[k] for k in expected} == expected | {"STREAMTTS_SYNTH_SPIN": "1"}
    # Every other shown value is a default, and reads back as one.
    defaults = PipelineSettings()
    assert loaded["STREAMTTS_CHUNK_MAX_MS"] == str(defaults.synthesis.chunk_max_ms)
    assert loaded["STREAMTTS_SINK_STALE_S"] == str(defaults.storage.sink_stale_s)


def test_default_inference_threads_follow_the_cpus_the_process_may_use() -> None:
    probe = "from processors.synthesize.speech_stack import usable_cpus; print(usable_cpus())"
    pinned = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}),
    )
    assert pinned.stdout.strip() == "1"
