"""`streamtts bench --cache`: the render cache on a customer-service workload.

Repetition as in a contact centre: a fixed prompt set drawn Zipf-distributed (greetings,
hold messages, menus, legal notices), and a share of templated requests whose fixed head is
shared and whose slot (a code, an order number, a date) is not. The same Poisson schedule and
the same draws run three times per voice, side by side: cache **off**, **cold** (empty
shared tier) and **warm** (`cache warm` of the prompt set first, preloaded by the worker).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from streamtts.bench.bench_facts import say
from streamtts.bench.fresh_workers import Scenario, ScenarioPlan
from streamtts.bench.loadgen import PipelineClient, RequestShape, open_loop, progress_line
from streamtts.bench.stats import RequestRecord, Summary, percentile, summarize
from streamtts.bench.worker_procs import UsageWindow
from streamtts.bench.workloads import WorkItem
from streamtts.errors import StreamTTSError
from streamtts.runtime.settings import Settings

PROMPTS = {
    "en": [
        "Thank you for calling. How can I help you today?",
        "Please hold while I transfer you to a specialist.",
        "Your call is important to us. Please stay on the line.",
        "For billing, press one. For technical support, press two.",
        "I'm sorry, I didn't catch that. Could you repeat it, please?",
        "This call may be recorded for quality and training purposes.",
        "Is there anything else I can help you with today?",
        "Thank you for your patience. An agent will be with you shortly.",
        "Please say or enter your account number, followed by the pound key.",
        "Our offices are open Monday to Friday, nine to five.",
        "Thank you for calling. Have a great day!",
        "I have transferred your request to our billing team.",
    ],
    "zh": [
        "您好，请问有什么可以帮您？",
        "请稍等，正在为您转接人工服务。",
        "感谢您的耐心等待，客服人员将尽快为您服务。",
        "查询账单请按1，技术支持请按2。",
        "抱歉，我没有听清楚，请您再说一遍。",
        "为了保证服务质量，本次通话可能会被录音。",
        "请问还有其他可以帮您的吗？",
        "感谢您的来电，祝您生活愉快！",
        "请输入您的账号，并以井号键结束。",
        "我们的服务时间是周一至周五，早九点到晚六点。",
    ],
}
TEMPLATES = {
    "en": [
        "Your verification code is {code}. It expires in five minutes.",
        "Your order {order} has shipped and will arrive on {day}.",
        "Thank you for calling. Your balance is {amount} dollars.",
    ],
    "zh": [
        "您的验证码是{code}，五分钟内有效。",
        "您的订单{order}已发货，预计{day}送达。",
        "感谢您的来电，您的账户余额为{amount}元。",
    ],
}
DAYS = {"en": ["Monday", "Tuesday", "Friday"], "zh": ["明天", "后天", "周五"]}
VOICE_LANG = {"en_joe": "en", "jm_kumo": "zh"}


def cs_workload(
    lang: str, n: int, rng: random.Random, zipf_s: float = 1.1, template_share: float = 0.3
) -> list[WorkItem]:
    """`n` requests: Zipf-ranked fixed prompts, plus templates with a random slot."""
    prompts = PROMPTS[lang]
    weights = [1 / (rank**zipf_s) for rank in range(1, len(prompts) + 1)]
    items = []
    for _ in range(n):
        if rng.random() < template_share:
            text = rng.choice(TEMPLATES[lang]).format(
                code=f"{rng.randrange(10**6):06d}",
                order=f"{rng.randrange(10**8):08d}",
                day=rng.choice(DAYS[lang]),
                amount=rng.randrange(10, 999),
            )
        else:
            text = rng.choices(prompts, weights)[0]
        items.append(WorkItem(text, lang, "short"))
    return items


@dataclass
class CacheRun:
    voice: str
    mode: str
    rate: float
    summary: Summary
    cpu_s_per_request: float
    hit_ratio: float
    first_span_hit_ratio: float
    records: list[RequestRecord] = field(default_factory=list, repr=False)

    def hit_ttfa(self, q: float) -> float:
        """TTFA percentile of the requests whose first span came from the cache."""
        hits = [r.ttfa_s for r in self.records if r.first_cached and r.ttfa_s is not None]
        return percentile(hits, q) if hits else float("nan")

    def hit_leave(self, q: float) -> float:
        """Percentile of request created → first chunk encoded, for first-span hits: the
        pipeline's own part of their first audio (no subscriber hop)."""
        hits = [r.first_left_s for r in self.records if r.first_cached and r.first_left_s is not None]
        return percentile(hits, q) if hits else float("nan")

    def row(self) -> dict[str, Any]:
        s = self.summary
        return {
            "voice": self.voice,
            "cache": self.mode,
            "offered_rps": self.rate,
            "sent": s.sent,
            "completed": s.completed,
            "lost": s.lost,
            "throughput_rps": round(s.throughput_rps, 3),
            "ttfa_p50_s": round(s.ttfa.p50, 3),
            "ttfa_p99_s": round(s.ttfa.p99, 3),
            "cpu_s_per_request": round(self.cpu_s_per_request, 3),
            "span_hit_ratio": round(self.hit_ratio, 3),
            "first_span_hit_ratio": round(self.first_span_hit_ratio, 3),
            "ttfa_first_hit_p50_s": round(self.hit_ttfa(50), 3),
            "ttfa_first_hit_p99_s": round(self.hit_ttfa(99), 3),
            "first_hit_leaves_p50_s": round(self.hit_leave(50), 3),
            "first_hit_leaves_p99_s": round(self.hit_leave(99), 3),
        }


async def _scenario(
    scenario: Scenario, items: Sequence[WorkItem], schedule: Sequence[float], cache_prefix: str
) -> CacheRun:
    voice, mode = scenario.voice, scenario.mode
    env = {
        "STREAMTTS_RENDER_CACHE": "0" if mode == "off" else "1",
        "STREAMTTS_RENDER_CACHE_PREFIX": cache_prefix,
    }
    async with scenario.workers(env) as (prefix, workers):
        client = PipelineClient(dataclasses.replace(scenario.settings.kafka, topic_prefix=prefix))
        try:
            await client.start()
            warm = [
                await client.send(WorkItem("One moment.", VOICE_LANG[voice], "short"), RequestShape(voice))
            ]
            if await client.wait_all(warm, 90):
                raise StreamTTSError(f"{voice}/{mode}: the warm-up request did not complete")
            if mode == "warm":
                # Warm means every cache on the path: each prompt once through the pipeline, so
                # the encode stage holds its payloads too (a hit's first encoding is ~80 ms).
                lang = VOICE_LANG[voice]
                primed = [
                    await client.send(WorkItem(t, lang, "short"), RequestShape(voice)) for t in PROMPTS[lang]
                ]
                if await client.wait_all(primed, 120):
                    raise StreamTTSError(f"{voice}/{mode}: the priming requests did not complete")
            usage = UsageWindow(workers.pids).start()
            label = progress_line(f"{voice} cache {mode}")
            recs = await open_loop(
                client, items, schedule, RequestShape(voice), drain_s=scenario.drain_s, say=label
            )
            used = usage.stop()
        finally:
            await client.stop()
    summary = summarize(recs)
    spans = sum(r.spans for r in recs)
    run = CacheRun(
        voice,
        mode,
        scenario.rate,
        summary,
        sum(u.cpu_s for u in used.values()) / max(1, summary.completed),
        sum(r.cache_hits for r in recs) / spans if spans else 0.0,
        sum(r.first_cached for r in recs) / max(1, len(recs)),
        list(recs),
    )
    say(
        f"{voice} {mode}: {summary.completed}/{summary.sent} done, TTFA p50 {summary.ttfa.p50:.3f} s "
        f"p99 {summary.ttfa.p99:.3f} s, {summary.throughput_rps:.2f} req/s, "
        f"{run.cpu_s_per_request:.2f} CPU s/request, span hit ratio {run.hit_ratio:.2f}"
    )
    return run


def _warm_shared_tier(settings: Settings, voice: str, cache_prefix: str) -> None:
    """`streamtts cache warm` of the voice's prompt set and template heads, in-process."""
    from streamtts.processors.direct import warm_cache
    from streamtts.processors.segment.span_limits import SpanLimits
    from streamtts.processors.synthesize.registry import VoiceRegistry
    from streamtts.processors.synthesize.speech_stack import build_cache
    from streamtts.processors.synthesize.synthesizer import Synthesizer
    from streamtts.runtime.pipeline_settings import PipelineSettings

    pipeline = PipelineSettings.from_env().replace(render_cache=True, render_cache_prefix=cache_prefix)
    cache = build_cache(pipeline, settings.s3)
    assert cache is not None
    synth = Synthesizer(VoiceRegistry(threads=2), cache=cache)
    lang = VOICE_LANG[voice]
    for text in PROMPTS[lang]:
        warm_cache(
            synth, text, voice_id=voice, limits=SpanLimits(first_min_chars=pipeline.text.first_min_chars)
        )
    cache.flush()


async def run_cache_bench(
    plan: ScenarioPlan, modes: Sequence[str] = ("off", "cold", "warm")
) -> list[CacheRun]:
    """Off, cold and warm (or `modes`) per voice on the same schedule."""
    settings = Settings.from_env()
    runs: list[CacheRun] = []
    stamp = time.strftime("%Y%m%d%H%M%S")
    for voice in plan.voices:
        rng, schedule = plan.schedule(voice)
        items = cs_workload(VOICE_LANG[voice], len(schedule), rng)
        for mode in modes:
            cache_prefix = f"render-cache-bench-{stamp}-{voice}-{'cold' if mode == 'cold' else 'warm'}/"
            if mode == "warm":
                say(f"{voice}: warming the shared tier with {len(PROMPTS[VOICE_LANG[voice]])} prompts")
                await asyncio.to_thread(_warm_shared_tier, settings, voice, cache_prefix)
            runs.append(
                await _scenario(plan.scenario(settings, "cache", voice, mode), items, schedule, cache_prefix)
            )
    return runs


def markdown(runs: Sequence[CacheRun]) -> str:
    head = (
        "| voice | cache | offered req/s | done/sent | lost | TTFA p50 | TTFA p99 | req/s | CPU s/request "
        "| span hit ratio | first span hit | TTFA of hits p50 / p99 | hits leave the pipeline p50 / p99 |\n"
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
    )
    lines = [head]
    for r in runs:
        s = r.summary
        lines.append(
            f"| {r.voice} | {r.mode} | {r.rate:g} | {s.completed}/{s.sent} | {s.lost} | {s.ttfa.p50:.3f} s "
            f"| {s.ttfa.p99:.3f} s | {s.throughput_rps:.2f} | {r.cpu_s_per_request:.2f} | {r.hit_ratio:.2f} "
            f"| {r.first_span_hit_ratio:.2f} | {r.hit_ttfa(50):.3f} / {r.hit_ttfa(99):.3f} s "
            f"| {r.hit_leave(50) * 1000:.0f} / {r.hit_leave(99) * 1000:.0f} ms |"
        )
    return "\n".join(lines)
