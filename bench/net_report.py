"""The Jepsen-style report of a network-fault run: the fault history beside the request history,
the checker's verdict per invariant, and latency over time with the fault windows shaded."""

from __future__ import annotations

from pathlib import Path

from streamtts.bench.net_chaos import NetChaosReport
from streamtts.bench.stats import percentile
from streamtts.bench.tables import markdown_rows


def markdown(report: NetChaosReport, plot_name: str | None = None) -> str:
    t0 = report.started
    lat = sorted(s for _, s, _ in report.latencies)
    lines = [
        f"### {report.guarantee}" + (f", seed {report.seed}" if report.seed is not None else ""),
        "",
        f"- workers' group session: {report.session_timeout_s:g} s",
        f"- acknowledged requests: {len(report.sent)} (not acknowledged: {report.not_acked})",
        f"- settled after the last heal: {'yes' if report.settled else 'NO'} "
        f"({report.settle_after_heal_s:.1f} s)",
        f"- workers that exited by themselves (restarted): {', '.join(report.unplanned_restarts) or 'none'}",
    ]
    if lat:
        lines.append(
            f"- send → result: p50 {percentile(lat, 50):.2f} s, p99 {percentile(lat, 99):.2f} s, "
            f"max {lat[-1]:.2f} s"
        )
    lines += ["", "Faults:", ""]
    lines.append(
        markdown_rows(
            [
                {
                    "nemesis": f.nemesis,
                    "target": f.target,
                    "from s": round(f.started - t0, 1),
                    "healed s": round(f.healed - t0, 1),
                    "requests sent inside": sum(
                        1 for at in report.sent.values() if f.started <= at <= f.healed
                    ),
                    "slowest of them s": round(
                        max(
                            (s for at, s, _ in report.latencies if f.started <= at <= f.healed),
                            default=0.0,
                        ),
                        1,
                    ),
                }
                for f in report.faults
            ]
        )
    )
    lines += ["", "Checker:", "", markdown_rows([v.row() for v in report.verdicts])]
    if plot_name:
        lines += ["", f"![latency over time, faults shaded]({plot_name})"]
    return "\n".join(lines) + "\n"


def plot(report: NetChaosReport, out: Path) -> bool:
    """Latency (send → first result) against send time, each fault window shaded and named.
    False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    t0 = report.started
    fig, ax = plt.subplots(figsize=(11, 4))
    for i, fault in enumerate(report.faults):
        ax.axvspan(fault.started - t0, fault.healed - t0, color=f"C{i % 10}", alpha=0.18)
        ax.text(
            fault.started - t0,
            1.0,
            fault.nemesis,
            transform=ax.get_xaxis_transform(),
            fontsize=7,
            va="top",
            rotation=90,
        )
    ok = [(at - t0, s) for at, s, status in report.latencies if status == "completed"]
    bad = [(at - t0, s) for at, s, status in report.latencies if status != "completed"]
    if ok:
        ax.scatter([x for x, _ in ok], [y for _, y in ok], s=6, color="black", label="completed")
    if bad:
        ax.scatter([x for x, _ in bad], [y for _, y in bad], s=12, color="red", marker="x", label="failed")
    ax.set_xlabel("request sent at (s since the load began)")
    ax.set_ylabel("send → result (s)")
    ax.set_title(f"network faults, {report.guarantee}: latency over time")
    ax.legend(loc="upper right", fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True
