"""Pure parts of the gateway: sentence splitting, token buckets, configuration parsing."""

from __future__ import annotations

import pytest

from streamtts.errors import ConfigError
from streamtts.gateway.ratelimit import RateLimiter
from streamtts.gateway.settings import GatewaySettings, RateLimit, parse_api_keys, parse_tenant_rates
from streamtts.gateway.ws_sentences import split_sentences


def test_sentences_complete_only_at_a_terminator_followed_by_space_or_cjk_stop() -> None:
    assert split_sentences("It costs 3.5 dollars. And th") == (["It costs 3.5 dollars."], "And th")
    assert split_sentences("Wait for it.") == ([], "Wait for it.")  # may be "it.…" mid-stream
    assert split_sentences("你好。今天天气很好！明") == (["你好。", "今天天气很好！"], "明")
    assert split_sentences('He said "go!" Then left. ') == (['He said "go!"', "Then left."], "")


def test_token_bucket_refills_per_tenant() -> None:
    now = [0.0]
    limiter = RateLimiter(lambda t: RateLimit(per_s=1.0, burst=2.0), clock=lambda: now[0])
    assert [limiter.take("a") for _ in range(2)] == [0.0, 0.0]
    assert limiter.take("a") == pytest.approx(1.0)
    assert limiter.take("b") == 0.0, "buckets are per tenant"
    now[0] = 1.0
    assert limiter.take("a") == 0.0


def test_keys_and_rates_parse_and_bad_ones_name_the_setting() -> None:
    assert parse_api_keys("k1:acme, k2:globex\n# comment\nk:3:tiny") == {
        "k1": "acme",
        "k2": "globex",
        "k:3": "tiny",
    }
    assert parse_tenant_rates("acme=2:5") == {"acme": RateLimit(2.0, 5.0)}
    with pytest.raises(ConfigError, match="API_KEYS"):
        parse_api_keys("justakey")
    with pytest.raises(ConfigError, match="TENANT_RATES"):
        parse_tenant_rates("acme=fast")
    with pytest.raises(ConfigError, match="tenant"):
        GatewaySettings(api_keys={"k": "Not A Tenant"})


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    keys = tmp_path / "keys"
    keys.write_text("filekey:fromfile\n")
    monkeypatch.setenv("STREAMTTS_GATEWAY_API_KEYS", "key1:tenant-a")
    monkeypatch.setenv("STREAMTTS_GATEWAY_API_KEYS_FILE", str(keys))
    monkeypatch.setenv("STREAMTTS_GATEWAY_TENANT_RATES", "tenant-a=0.5:3")
    monkeypatch.setenv("STREAMTTS_GATEWAY_WS_MAX_SESSIONS", "7")
    s = GatewaySettings.from_env()
    assert s.api_keys == {"key1": "tenant-a", "filekey": "fromfile"}
    assert s.rate_for("tenant-a") == RateLimit(0.5, 3.0) and s.rate_for("other") == s.default_rate
    assert s.ws_max_sessions == 7


@pytest.mark.parametrize(("raw", "presign"), [("", True), ("off", False), ("no", False), ("true", True)])
def test_presign_reads_booleans(monkeypatch: pytest.MonkeyPatch, raw: str, presign: bool) -> None:
    monkeypatch.setenv("STREAMTTS_GATEWAY_PRESIGN", raw)
    assert GatewaySettings.from_env().presign is presign


def test_a_bad_presign_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMTTS_GATEWAY_PRESIGN", "sometimes")
    with pytest.raises(ConfigError, match="STREAMTTS_GATEWAY_PRESIGN must be true or false"):
        GatewaySettings.from_env()
