"""The zero-load spread tool: its summary and its one-line CLI mistakes (the rendering itself
is the real model's, measured by the tool, not asserted here)."""

from __future__ import annotations

import pytest

from streamtts.bench.first_span_spread import main, spread, table


def test_spread_summarizes_one_time_per_text() -> None:
    times = [100.0] * 98 + [300.0, 400.0]
    row = spread(40, times, [1.0] * 99 + [2.5])
    assert row.texts == 100
    assert row.p50_ms == 100.0
    assert row.max_ms == 400.0
    # numpy's linear percentile between the 99th and 100th values: 300 + 0.01 * 100
    assert row.p99_ms == pytest.approx(301.0)
    assert row.ratio == pytest.approx(3.01)
    assert (row.audio_p50_s, row.audio_max_s) == (1.0, 2.5)
    assert "| 40 | 100 | 100 | 100 | 301 | 400 | **3.01** | 1.00 / 2.50 |" in table("jm_kumo", [row])


def test_spread_refuses_mismatched_samples() -> None:
    with pytest.raises(ValueError):
        spread(40, [1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        spread(40, [], [])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--first-max", "40,x"], "comma-separated integers"),
        (["--first-max", "2"], "at least 4"),
        (["--threads", "0"], "--threads must be at least 1"),
    ],
)
def test_cli_mistakes_are_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert message in err
