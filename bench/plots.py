"""PNG plots of a bench result: latency CDFs and latency vs offered load (matplotlib, headless)."""

from __future__ import annotations

import math
from pathlib import Path

from streamtts.bench.bench_plan import BenchResult, LoadRun
from streamtts.bench.capacity import P99_TTFA_TARGET_S
from streamtts.bench.tail import plot_tail


def _cdf(ax: object, values: list[float], label: str) -> None:
    vals = sorted(v for v in values if v is not None and not math.isnan(v))
    if not vals:
        return
    ys = [(i + 1) / len(vals) for i in range(len(vals))]
    ax.step(vals, ys, where="post", label=f"{label} (n={len(vals)})")  # type: ignore[attr-defined]


def _cdf_runs(result: BenchResult) -> list[LoadRun]:
    keep = ("direct", "overhead", "sustained", "burst", "long_form", "custom")
    return [r for r in result.runs if r.section in keep and r.records]


def plot_all(result: BenchResult, out: Path) -> list[str]:
    """Write the PNGs; returns their file names (empty when matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    names = []

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for run in _cdf_runs(result):
        label = f"{run.voice} {run.name}"
        _cdf(axes[0], [r.ttfa_s for r in run.records if r.ttfa_s is not None], label)
        _cdf(axes[1], [r.completion_s for r in run.records if r.completion_s is not None], label)
    axes[0].axvline(P99_TTFA_TARGET_S, color="grey", linestyle=":", linewidth=1)
    for ax, title in zip(axes, ("time to first audio", "completion (all chunks + stored)"), strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("seconds (log)")
        ax.set_ylabel("fraction of requests")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "latency_cdf.png", dpi=110)
    plt.close(fig)
    names.append("latency_cdf.png")

    caps = [c for c in result.capacity if c.steps]
    if caps:
        fig, axes = plt.subplots(1, len(caps), figsize=(6 * len(caps), 4.2), squeeze=False)
        for ax, cap in zip(axes[0], caps, strict=True):
            steps = sorted(cap.steps, key=lambda s: s.rate)
            rates = [s.rate for s in steps]
            for attr, style in (("p50", "o-"), ("p95", "s--"), ("p99", "^-")):
                ax.plot(rates, [getattr(s.summary.ttfa, attr) for s in steps], style, label=f"TTFA {attr}")
            ax.plot(rates, [s.summary.completion.p50 for s in steps], "x:", label="completion p50")
            for s in steps:
                if not s.passed:
                    ax.annotate("✗", (s.rate, s.summary.ttfa.p99), color="red", fontsize=12, ha="center")
            ax.axhline(P99_TTFA_TARGET_S, color="red", linestyle=":", linewidth=1, label="1.2 s target")
            if cap.best:
                ax.axvline(
                    cap.rate, color="green", linestyle="--", linewidth=1, label=f"capacity {cap.rate:g}"
                )
            ax.set_yscale("log")
            ax.set_xlabel("offered load (requests/s, Poisson)")
            ax.set_ylabel("seconds (log)")
            ax.set_title(f"latency vs load — {cap.voice}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "latency_vs_load.png", dpi=110)
        plt.close(fig)
        names.append("latency_vs_load.png")

    compare = [r for r in result.runs if r.section in ("overhead", "direct", "guarantees", "scale_out")]
    tput = [r for r in compare if r.section != "overhead" or "c=1" not in r.name]
    tput = [r for r in tput if r.name != "direct long-form"]
    if tput:
        voices = sorted({r.voice for r in tput}, key=result.plan.voices.index)
        fig, axes = plt.subplots(1, len(voices), figsize=(6 * len(voices), 4), squeeze=False)
        for ax, voice in zip(axes[0], voices, strict=True):
            runs = [r for r in tput if r.voice == voice]
            labels = [f"{r.name}\n{r.topology if r.section != 'direct' else ''}".strip() for r in runs]
            ax.barh(range(len(runs)), [r.summary.throughput_rps for r in runs], color="tab:blue")
            ax.set_yticks(range(len(runs)), labels, fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel("completed requests/s")
            ax.set_title(f"throughput — {voice}")
            ax.grid(True, axis="x", alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / "throughput.png", dpi=110)
        plt.close(fig)
        names.append("throughput.png")
    tail_voices = sorted({r.voice for r in result.runs if r.section == "tail"})
    if tail_voices:
        fig, axes = plt.subplots(1, len(tail_voices), figsize=(6 * len(tail_voices), 4.2), squeeze=False)
        by_voice = dict(zip(tail_voices, axes[0], strict=True))
        if plot_tail(result.runs, by_voice.__getitem__):
            for ax in axes[0]:
                ax.axhline(P99_TTFA_TARGET_S, color="red", linestyle=":", linewidth=1)
                ax.grid(True, alpha=0.3)
            fig.tight_layout()
            fig.savefig(out / "tail_latency_vs_load.png", dpi=110)
            names.append("tail_latency_vs_load.png")
        plt.close(fig)
    return names
