"""Pipeline settings: grouped per concern, each named once (variable and config keys derived)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamtts.errors import ConfigError
from streamtts.runtime.config_file import effective_config, load_config_file, render_toml
from streamtts.runtime.pipeline_settings import PipelineSettings, specs

# Every variable the flat settings were read from: deployments set these, so they must stay.
VARIABLES = """
    FIRST_MAX_CHARS FIRST_MIN_CHARS MAX_CHARS MAX_TEXT_CHARS LONG_TEXT_CHARS MARKUP SSML_UNKNOWN
    PLAN_BUDGET_S STREAM_IDLE_S STREAM_MAX_DELTAS STREAM_LATER_DELAY_MS
    SYNTH_THREADS SYNTH_SPIN SYNTH_LOOKAHEAD SYNTH_WORKERS WARM_VOICES CHUNK_MAX_MS
    SYNTH_SCHEDULER SYNTH_LANES SYNTH_FIRST_LANES SYNTH_BULK_NICE SYNTH_PREEMPT_AFTER_MS SYNTH_PIECE_MS SYNTH_LOAD_REPORT_S
    G2P_BUDGET_MS INFERENCE_BUDGET_S INFERENCE_BUDGET_PER_CHAR_S BREAKER_THRESHOLD BREAKER_OPEN_S
    RENDER_CACHE RENDER_CACHE_MB RENDER_CACHE_SHARED RENDER_CACHE_PRELOAD RENDER_CACHE_PREFIX
    PRESIGN_EXPIRY_S STORAGE_RETRIES SINK_STALE_S RETENTION_DAYS TENANT_RETENTION_DAYS STORE_STREAMED_FRAMES
    PROCESSING_GUARANTEE SESSION_TIMEOUT_S ENCODE_LOOKAHEAD METADATA_REFRESH_S WIRE_FORMAT REPLY_TOPIC_PREFIX
    OPS_PORT CANARY_INTERVAL_S SHUTDOWN_TIMEOUT_S STARTUP_TIMEOUT_S STARTUP_STEP_TIMEOUT_S
    RELEASE RELEASE_VOICES RELEASE_GUARD
""".split()


def test_every_variable_keeps_its_name_and_reaches_its_field() -> None:
    assert sorted(s.env for s in specs()) == sorted(f"STREAMTTS_{v}" for v in VARIABLES)
    by_env = {s.env: s for s in specs()}
    assert (by_env["STREAMTTS_RENDER_CACHE_MB"].group, by_env["STREAMTTS_RENDER_CACHE_MB"].name) == (
        "render_cache",
        "mb",
    )
    assert (by_env["STREAMTTS_RELEASE"].group, by_env["STREAMTTS_RELEASE"].name) == ("release", "name")
    assert by_env["STREAMTTS_FIRST_MAX_CHARS"].key == "pipeline.text.first_max_chars"


def test_each_kind_is_parsed_from_its_variable() -> None:
    env = {
        "STREAMTTS_FIRST_MAX_CHARS": "30",
        "STREAMTTS_INFERENCE_BUDGET_S": "2.5",
        "STREAMTTS_RENDER_CACHE": "off",
        "STREAMTTS_WARM_VOICES": "en_joe, jm_kumo,",
        "STREAMTTS_MARKUP": "ssml",
        "STREAMTTS_RELEASE": "kumo-v2",
        "STREAMTTS_RELEASE_VOICES": "jm_kumo=jf_alpha",
        "STREAMTTS_REPLY_TOPIC_PREFIX": "",  # empty: the default
    }
    p = PipelineSettings.from_env(env)
    assert (p.text.first_max_chars, p.degradation.inference_budget_s) == (30, 2.5)
    assert p.render_cache.enabled is False and p.render_cache.mb == 256
    assert p.synthesis.warm_voices == ("en_joe", "jm_kumo")
    assert (p.text.markup, p.release.name, p.release.voices) == ("ssml", "kumo-v2", ("jm_kumo=jf_alpha",))
    assert p.delivery.reply_topic_prefix == "tts.reply."
    assert PipelineSettings.from_env({"STREAMTTS_WARM_VOICES": ""}).synthesis.warm_voices == ()
    assert PipelineSettings.from_env({}) == PipelineSettings()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"STREAMTTS_MAX_CHARS": "many"}, "STREAMTTS_MAX_CHARS must be an integer, got 'many'"),
        ({"STREAMTTS_BREAKER_OPEN_S": "soon"}, "STREAMTTS_BREAKER_OPEN_S must be a number, got 'soon'"),
        ({"STREAMTTS_RELEASE_GUARD": "maybe"}, "STREAMTTS_RELEASE_GUARD must be true or false"),
        ({"STREAMTTS_MARKUP": "html"}, "STREAMTTS_MARKUP must be reject, strip or ssml, got 'html'"),
        (
            {"STREAMTTS_PROCESSING_GUARANTEE": "at_most_once"},
            "STREAMTTS_PROCESSING_GUARANTEE must be at_least_once or exactly_once, got 'at_most_once'",
        ),
        ({"STREAMTTS_SYNTH_WORKERS": "0"}, "STREAMTTS_SYNTH_WORKERS must be at least 1, got 0"),
        ({"STREAMTTS_FIRST_MAX_CHARS": "200"}, "STREAMTTS_MAX_CHARS (150) must be ≥ FIRST_MAX_CHARS (200)"),
        ({"STREAMTTS_OPS_PORT": "70000"}, "STREAMTTS_OPS_PORT must be 0–65535"),
        ({"STREAMTTS_RELEASE": "Bad.Name"}, "STREAMTTS_RELEASE must be lower-case"),
        ({"STREAMTTS_SYNTH_BULK_NICE": "20"}, "STREAMTTS_SYNTH_BULK_NICE must be 0-19, not 20"),
        ({"STREAMTTS_ENCODE_LOOKAHEAD": "-1"}, "STREAMTTS_ENCODE_LOOKAHEAD must be ≥ 0, got -1"),
        (
            {"STREAMTTS_SYNTH_FIRST_LANES": "-2"},
            "STREAMTTS_SYNTH_FIRST_LANES must be -1 (one per lane), 0 or more",
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        PipelineSettings.from_env(env)


def test_of_and_replace_take_the_flat_names_and_validate() -> None:
    p = PipelineSettings.of(first_max_chars=30, render_cache_mb=64, release="canary", release_guard=False)
    assert (p.text.first_max_chars, p.render_cache.mb, p.release.name, p.release.guard) == (
        30,
        64,
        "canary",
        False,
    )
    q = p.replace(synth_threads=2)
    assert q.synthesis.threads == 2 and q.text == p.text and p.synthesis.threads == 0
    with pytest.raises(TypeError, match="no setting 'first_chars'"):
        PipelineSettings.of(first_chars=3)
    with pytest.raises(ConfigError, match="STREAMTTS_MARKUP must be"):
        PipelineSettings.of(markup="html")  # choices hold for code, not only for the environment


def test_the_config_file_takes_grouped_and_flat_keys(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        "[pipeline]\nfirst_max_chars = 30\nrender_cache_mb = 64\n"
        '[pipeline.release]\nname = "canary"\nvoices = ["jm_kumo=jf_alpha"]\n'
        "[pipeline.synthesis]\nthreads = 2\n"
    )
    assert load_config_file(path) == {
        "STREAMTTS_FIRST_MAX_CHARS": "30",
        "STREAMTTS_RENDER_CACHE_MB": "64",
        "STREAMTTS_RELEASE": "canary",
        "STREAMTTS_RELEASE_VOICES": "jm_kumo=jf_alpha",
        "STREAMTTS_SYNTH_THREADS": "2",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[pipeline]\nsynth_threads = 2\n[pipeline.synthesis]\nthreads = 3\n",
            "pipeline.synth_threads and pipeline.synthesis.threads are the same setting",
        ),
        ('[pipeline.text]\nmarkup = "html"\n', "pipeline.text.markup must be one of reject, strip, ssml"),
        ("[pipeline.text]\nthreads = 2\n", "unknown key 'pipeline.text.threads'"),
        ('[pipeline.render_cache]\nmb = "lots"\n', "pipeline.render_cache.mb must be an integer"),
    ],
)
def test_a_bad_config_key_fails_naming_it(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config_file(path)


def test_config_show_prints_one_table_per_group_that_loads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMTTS_RENDER_CACHE_MB", "64")
    monkeypatch.setenv("STREAMTTS_RELEASE", "canary")
    shown = render_toml(effective_config())
    assert (
        "[pipeline.render_cache]\nenabled = true  # STREAMTTS_RENDER_CACHE\nmb = 64  # STREAMTTS_RENDER_CACHE_MB"
        in shown
    )
    assert {f"[pipeline.{s.group}]" for s in specs()} <= set(shown.splitlines())
    path = tmp_path / "shown.toml"
    path.write_text(shown)
    loaded = load_config_file(path)
    assert (loaded["STREAMTTS_RENDER_CACHE_MB"], loaded["STREAMTTS_RELEASE"]) == ("64", "canary")
    assert PipelineSettings.from_env(loaded) == PipelineSettings.from_env()
