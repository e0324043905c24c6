"""Unauthenticated refusals are audited within a budget per client address (and in all), so a
flood of bad keys cannot fill the audit queue and push out the events of real tenants."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest

from streamtts.gateway.audit_trail import ThrottledAudit
from streamtts.gateway.settings import GatewaySettings, RateLimit
from streamtts.schemas.audit import AuditEvent
from tests.gateway.conftest import ACME
from tests.helpers import metric


class _Inner:
    def __init__(self) -> None:
        self.events: list[AuditEvent] = []

    def record(self, event: AuditEvent) -> None:
        self.events.append(event)

    async def start(self) -> None: ...
    async def flush(self) -> None: ...
    async def stop(self) -> None: ...


def _event(client: str | None, tenant: str | None = None) -> AuditEvent:
    return AuditEvent.new(
        source="gateway", action="status", outcome="unauthorized", tenant=tenant, client=client
    )


def test_each_client_gets_a_budget_of_unauthenticated_events_and_tenants_are_never_limited() -> None:
    now = [0.0]
    inner = _Inner()
    audit = ThrottledAudit(
        inner,
        per_client=RateLimit(per_s=1.0, burst=3.0),
        overall=RateLimit(per_s=100.0, burst=100.0),
        clock=lambda: now[0],
    )
    for _ in range(50):
        audit.record(_event("10.0.0.1"))
    assert len(inner.events) == 3 and audit.suppressed == 47
    audit.record(_event("10.0.0.2"))  # another client has its own budget
    for _ in range(50):
        audit.record(_event("10.0.0.1", tenant="acme"))  # an identified caller: always recorded
    assert len(inner.events) == 54
    now[0] = 2.0  # the budget refills
    audit.record(_event("10.0.0.1"))
    audit.record(_event("10.0.0.1"))
    audit.record(_event("10.0.0.1"))
    assert len(inner.events) == 56


def test_many_addresses_share_one_overall_budget_and_memory_stays_bounded() -> None:
    inner = _Inner()
    audit = ThrottledAudit(
        inner,
        per_client=RateLimit(1.0, 5.0),
        overall=RateLimit(1.0, 20.0),
        clock=lambda: 0.0,
        max_clients=100,
    )
    for i in range(5000):  # an attacker rotating source addresses
        audit.record(_event(f"2001:db8::{i:x}"))
    assert len(inner.events) == 20
    assert audit.tracked_clients <= 100


@pytest.fixture
def gateway_settings(gateway_settings: GatewaySettings) -> GatewaySettings:
    return replace(gateway_settings, unauthenticated_audit_rate=RateLimit(per_s=0.01, burst=5.0))


@pytest.mark.integration
async def test_a_flood_of_bad_keys_is_answered_401_but_audited_within_its_budget(gateway_url: str) -> None:
    async with httpx.AsyncClient(base_url=gateway_url, timeout=30) as client:
        codes = {
            (await client.get(f"/v1/speech/x{i}", headers={"Authorization": "Bearer wrong"})).status_code
            for i in range(60)
        }
        assert codes == {401}, "every caller still gets its answer"
        assert (await client.get("/v1/speech/mine", headers=ACME)).status_code == 404
        text = (await client.get("/metrics")).text
    assert metric(text, "streamtts_audit_events_total", action="status") == 5 + 1  # budget + acme's
    assert metric(text, "streamtts_gateway_audit_suppressed_total") == 55
