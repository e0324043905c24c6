"""The sink's memory of finished requests: per tenant, bounded, never flips completed→failed."""

from __future__ import annotations

from datetime import UTC, datetime

from streamtts.sinks.finished import FinishedRequests

AT = datetime(2026, 12, 1, tzinfo=UTC)


def test_ids_are_per_tenant() -> None:
    f = FinishedRequests(ttl_s=60)
    f.add(("acme", "r1", ""), "completed", AT)
    assert f.status(("acme", "r1")) == "completed"
    assert f.status(("globex", "r1")) is None, "another tenant's r1 is another request"


def test_completed_is_never_overwritten_by_failed() -> None:
    f = FinishedRequests(ttl_s=60)
    f.add(("t", "r", ""), "completed", AT)
    f.add(("t", "r", ""), "failed", AT)
    assert f.status(("t", "r")) == "completed"


def test_entries_expire_and_the_size_is_bounded() -> None:
    now = [0.0]
    f = FinishedRequests(ttl_s=10, max_entries=3, clock=lambda: now[0])
    for i in range(5):
        f.add(("t", f"r{i}", ""), "completed", AT)
    assert len(f) == 3 and f.status(("t", "r0")) is None and f.status(("t", "r4")) == "completed"
    now[0] = 11.0
    assert f.status(("t", "r4")) is None and len(f) == 0


def test_each_rendering_is_remembered_on_its_own() -> None:
    f = FinishedRequests(ttl_s=60)
    f.add(("t", "r", ""), "completed", AT)
    assert f.has(("t", "r", "")) and not f.has(("t", "r", "2026-12-01T10:00:00+00:00"))
    f.add(("t", "r", "2026-12-01T10:00:00+00:00"), "completed", AT)
    assert f.has(("t", "r", "2026-12-01T10:00:00+00:00")) and f.has(("t", "r", ""))


def test_restore_undoes_an_add_whose_result_never_became_visible() -> None:
    finished = FinishedRequests(ttl_s=60)
    at = datetime.now(UTC)
    assert finished.add(("t", "new", ""), "completed", at) is None
    finished.restore(("t", "new"), None)
    assert finished.get(("t", "new")) is None, "an aborted first result leaves no trace"
    finished.add(("t", "old", ""), "failed", at)
    before = finished.add(("t", "old", "replay-1"), "completed", at)
    assert before is not None and before.status == "failed"
    finished.restore(("t", "old"), before)
    assert finished.status(("t", "old")) == "failed" and not finished.has(("t", "old", "replay-1"))
