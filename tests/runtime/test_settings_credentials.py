"""The local stack's S3 credentials are never sent to another host by accident."""

from __future__ import annotations

import pytest

from streamtts.errors import ConfigError
from streamtts.runtime.settings import Settings


def test_default_credentials_are_refused_for_a_remote_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMTTS_S3_ENDPOINT", "https://s3.example.com")
    monkeypatch.delenv("STREAMTTS_S3_ACCESS_KEY", raising=False)
    monkeypatch.delenv("STREAMTTS_S3_SECRET_KEY", raising=False)
    with pytest.raises(ConfigError, match="built-in development credentials"):
        Settings.from_env()
    monkeypatch.setenv("STREAMTTS_S3_ACCESS_KEY", "prod-key")
    monkeypatch.setenv("STREAMTTS_S3_SECRET_KEY", "prod-secret")
    assert Settings.from_env().s3.endpoint == "s3.example.com"


def test_default_credentials_are_fine_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMTTS_S3_ENDPOINT", "127.0.0.1:19000")
    monkeypatch.delenv("STREAMTTS_S3_ACCESS_KEY", raising=False)
    monkeypatch.delenv("STREAMTTS_S3_SECRET_KEY", raising=False)
    assert Settings.from_env().s3.access_key == "streamtts"


def test_the_local_hosts_subnet_is_the_one_net_hosts_makes() -> None:
    """The development pair is let through to the local hosts' bridge only: that subnet must be
    the one `infra up --hosts` makes, or the pair would leave the machine."""
    from streamtts.infra.local.net_hosts import CHECKER_ADDRESS, SUBNET
    from streamtts.runtime.settings import LOCAL_HOSTS_SUBNET

    assert LOCAL_HOSTS_SUBNET == f"{SUBNET}."
    assert CHECKER_ADDRESS.startswith(LOCAL_HOSTS_SUBNET)
