"""Access control at the edge: client-address allowlists per key and tenant (IPv4 and IPv6,
X-Forwarded-For believed only from trusted proxies), key rotation by rewriting the keys file
under a running gateway, and HTTPS with a self-signed certificate on the real process."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import orjson
import pytest
import websockets

from streamtts.features.audit.log import key_id
from streamtts.gateway.clientaddr import client_address
from streamtts.gateway.networks import parse_networks
from streamtts.gateway.settings import GatewaySettings
from streamtts.runtime.settings import KafkaSettings
from tests.gateway.served import Served, serve
from tests.helpers import cli_env, metric
from tests.services import Services

pytestmark = pytest.mark.integration

KEYS_YAML = """
tenants:
  globex: {allow: ["2001:db8::/32"]}     # every globex key, from this network only
keys:
  - {id: acme-office, key: key-office, tenant: acme, allow: [10.0.0.0/8]}
  - {id: globex-v6, key: key-v6, tenant: globex}
"""


@pytest.fixture
async def behind_proxy(
    gateway_settings: GatewaySettings, kafka_settings: KafkaSettings, services: Services, tmp_path: Path
) -> AsyncIterator[Served]:
    keys = tmp_path / "keys.yaml"
    keys.write_text(KEYS_YAML)
    settings = replace(gateway_settings, api_keys_file=str(keys), trusted_proxies=("127.0.0.1/32",))
    async for s in serve(settings, kafka_settings, services):
        yield s


def _from(address: str, key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "X-Forwarded-For": address}


async def test_addresses_outside_a_keys_or_tenants_allowlist_get_403_and_an_audit_event(
    behind_proxy: Served,
) -> None:
    body = {"text": "Hello.", "voice": "en_joe"}
    async with httpx.AsyncClient(base_url=behind_proxy.url, timeout=30) as client:
        assert (
            await client.post("/v1/speech", json=body, headers=_from("10.1.2.3", "key-office"))
        ).status_code == 202
        denied = await client.post("/v1/speech", json=body, headers=_from("192.0.2.7", "key-office"))
        assert denied.status_code == 403
        assert denied.json()["error"] == {
            "code": "denied_address",
            "message": "client address 192.0.2.7 is not allowed for this API key",
        }
        # The client wrote the leftmost hop itself; our proxy appended the real peer.
        spoofed = await client.post(
            "/v1/speech", json=body, headers=_from("10.9.9.9, 192.0.2.8", "key-office")
        )
        assert spoofed.status_code == 403
        # IPv6, and a tenant-wide list (also binding the environment's key of that tenant).
        assert (
            await client.post("/v1/speech", json=body, headers=_from("2001:db8::5", "key-v6"))
        ).status_code == 202
        assert (
            await client.post("/v1/speech", json=body, headers=_from("2001:db9::5", "key-v6"))
        ).status_code == 403
        assert (
            await client.get("/v1/speech/x", headers=_from("2001:db9::5", "key-globex"))
        ).status_code == 403
        assert (
            await client.get("/v1/speech/x", headers=_from("2001:db8::1", "key-globex"))
        ).status_code == 404
        # A key without lists works from anywhere.
        assert (
            await client.post("/v1/speech", json=body, headers=_from("192.0.2.7", "key-acme"))
        ).status_code == 202

    ws_url = behind_proxy.url.replace("http://", "ws://") + "/v1/stream"
    async with websockets.connect(ws_url, additional_headers=_from("192.0.2.9", "key-office")) as ws:
        assert orjson.loads(await ws.recv())["code"] == "denied_address"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403

    events = await behind_proxy.events(outcome="denied_address")
    assert sorted((e.action, e.client, e.tenant, e.key_id) for e in events) == [
        ("status", "2001:db9::5", "globex", key_id("key-globex")),
        ("submit", "192.0.2.7", "acme", "acme-office"),
        ("submit", "192.0.2.8", "acme", "acme-office"),
        ("submit", "2001:db9::5", "globex", "globex-v6"),
        ("ws_open", "192.0.2.9", "acme", "acme-office"),
    ]
    assert all(e.status in (403, None) for e in events)


def test_forwarded_for_is_believed_only_from_trusted_proxies() -> None:
    trusted = parse_networks(["10.0.0.0/8", "::1/128"], "test")

    def scope(peer: str, xff: str | None) -> dict[str, object]:
        headers = [(b"x-forwarded-for", xff.encode())] if xff else []
        return {"client": (peer, 1234), "headers": headers}

    assert str(client_address(scope("192.0.2.1", "10.0.0.5"), trusted)) == "192.0.2.1", "untrusted peer"
    assert str(client_address(scope("10.0.0.2", "198.51.100.4"), trusted)) == "198.51.100.4"
    assert (
        str(client_address(scope("10.0.0.2", "1.2.3.4, 198.51.100.4, 10.0.0.9"), trusted)) == "198.51.100.4"
    )
    assert str(client_address(scope("::1", "[2001:db8::7]:5555"), trusted)) == "2001:db8::7"
    assert client_address(scope("10.0.0.2", "not-an-ip"), trusted) is None, "unknown, matches no list"
    assert str(client_address(scope("10.0.0.2", None), trusted)) == "10.0.0.2"
    assert str(client_address(scope("10.0.0.2", "198.51.100.4"), ())) == "10.0.0.2", "no proxies trusted"


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # as an operator's tooling (or a Kubernetes secret) swaps the file


async def _until(check, what: str, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    """Poll `check` (a reload happens every 0.1 s) until true, or fail naming `what`."""
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting: {what}"
        await asyncio.sleep(0.05)


async def test_keys_rotate_without_restart_with_an_overlap(
    gateway_settings: GatewaySettings, kafka_settings: KafkaSettings, services: Services, tmp_path: Path
) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text("keys:\n  - {id: acme-1, key: old-key, tenant: acme}\n")
    settings = replace(gateway_settings, api_keys_file=str(keys), keys_reload_s=0.1)
    async for s in serve(settings, kafka_settings, services):
        async with httpx.AsyncClient(base_url=s.url, timeout=30) as client:

            async def code(key: str) -> int:
                return (
                    await client.get("/v1/speech/x", headers={"Authorization": f"Bearer {key}"})
                ).status_code

            assert (await code("old-key"), await code("new-key")) == (404, 401)
            not_after = datetime.now(UTC) + timedelta(seconds=3)
            _write(
                keys,
                "keys:\n"
                f"  - {{id: acme-1, key: old-key, tenant: acme, not_after: {not_after.isoformat()}}}\n"
                "  - {id: acme-2, key: new-key, tenant: acme}\n",
            )
            await _until(lambda: _is(code("new-key"), 404), "the new key works")
            assert await code("old-key") == 404, "both work during the overlap"
            await _until(lambda: _is(code("old-key"), 401), "the old key expires", timeout=10)
            assert datetime.now(UTC) >= not_after
            expired = await client.get("/v1/speech/x", headers={"X-API-Key": "old-key"})
            assert expired.json()["error"]["code"] == "key_expired"
            assert await code("new-key") == 404 and await code("key-acme") == 404, "env keys stay"

            _write(keys, "keys: [{key: broken}]\n")  # invalid: the keys in force are kept
            await _until(
                lambda: _metric(client, "streamtts_gateway_key_reloads_total", outcome="invalid"),
                "reload refused",
            )
            assert await code("new-key") == 404
            _write(keys, "keys: []\n")
            await _until(lambda: _is(code("new-key"), 401), "a removed key stops working")
        event = (await s.events(outcome="key_expired"))[0]
        assert (event.key_id, event.tenant, event.status) == ("acme-1", "acme", 401)


async def _is(status: object, expected: int) -> bool:
    return await status == expected  # type: ignore[misc]


async def _metric(client: httpx.AsyncClient, name: str, **labels: str) -> bool:
    return metric((await client.get("/metrics")).text, name, **labels) >= 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *(
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
            ),
            *("-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_gateway_serves_https_and_wss_with_a_self_signed_certificate(
    kafka_settings: KafkaSettings, services: Services, tmp_path: Path
) -> None:
    cert, key = _self_signed(tmp_path)
    port = _free_port()
    env = cli_env(kafka_settings, services.s3, gateway_api_keys="k1:acme")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "streamtts.cli.main",
        "gateway",
        "--port",
        str(port),
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    trust = ssl.create_default_context(cafile=str(cert))
    base = f"https://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, verify=trust, timeout=30) as client:
            async with asyncio.timeout(60):
                while True:
                    try:
                        if (await client.get("/healthz")).status_code == 200:
                            break
                    except httpx.ConnectError:
                        await asyncio.sleep(0.2)
            submitted = await client.post(
                "/v1/speech",
                json={"text": "Hello.", "voice": "en_joe"},
                headers={"Authorization": "Bearer k1"},
            )
            assert submitted.status_code == 202
        started = time.perf_counter()
        async with httpx.AsyncClient(verify=trust) as fresh:  # one new connection: a full handshake
            assert (await fresh.get(f"{base}/healthz")).status_code == 200
        print(f"new HTTPS connection + /healthz: {(time.perf_counter() - started) * 1000:.1f} ms")
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            async with httpx.AsyncClient() as untrusting:  # the system's CAs do not know it
                await untrusting.get(f"{base}/healthz")
        async with websockets.connect(
            f"wss://127.0.0.1:{port}/v1/stream", ssl=trust, additional_headers={"Authorization": "Bearer k1"}
        ) as ws:
            assert orjson.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "session"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert f"streamtts gateway on https://127.0.0.1:{port}/".encode() in out
    assert proc.returncode in (0, -signal.SIGTERM), err.decode()[-2000:]

    bad = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "streamtts.cli.main", "gateway"),
        *("--tls-cert", str(tmp_path / "none.pem"), "--tls-key", str(key)),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, bad_err = await asyncio.wait_for(bad.communicate(), 60)
    assert bad.returncode == 1 and bad_err.count(b"\n") == 1 and b"--tls-cert/--tls-key" in bad_err, bad_err
