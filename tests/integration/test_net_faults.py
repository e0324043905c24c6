"""The network as the fault, short: a broker, MinIO, two front workers (segment, encode, sink)
and a synthesize worker, each on a host of its own (network namespaces on a bridge), under a
steady load with exactly-once, while two nemeses cut links in turn — the first front cut from
the broker past its session while it still reaches MinIO (a zombie: front2 takes its
partitions, and fencing must keep whatever the zombie still uploads or sends from becoming a
second result or an orphan object), then both sinks cut from MinIO. The verdict is the
independent checker's (results, flips, objects, orphans, chunks, dead letters), read from the
topics and the bucket after every request settled; `streamtts chaos --hosts` runs the long
versions (docs/failure-handling.md).

Needs root for the namespaces (CI runs as root). Its hosts live on a net of their own
(10.79.0.0/24, `stsu-` names, state under .local/test-hosts), apart from `infra up --hosts`.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from streamtts.bench.net_chaos import NetChaosPlan, NetChaosRun
from streamtts.bench.net_nemeses import fixed_schedule
from streamtts.bench.net_report import markdown
from streamtts.infra.local.net_hosts import HostNet
from streamtts.infra.local.paths import PROJECT_ROOT, LocalPaths
from streamtts.infra.local.stack import LocalStack
from streamtts.runtime.settings import KafkaSettings, S3Settings, Settings
from tests.services import TEST_S3_SECRET, TEST_S3_USER

pytestmark = [
    pytest.mark.integration,
    pytest.mark.model,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)"),
]

NET = HostNet(subnet="10.79.0", bridge="stsubr0", ns_prefix="stsu-", veth_prefix="stsuv")
S3 = S3Settings(
    endpoint="unused:0", access_key=TEST_S3_USER, secret_key=TEST_S3_SECRET, bucket="streamtts-net"
)


@pytest.fixture(scope="module")
def hosts_stack() -> Iterator[LocalStack]:
    paths = LocalPaths(
        cache_dir=LocalPaths.from_env().cache_dir, state_dir=PROJECT_ROOT / ".local" / "test-hosts"
    )
    stack = LocalStack.on_hosts(Settings(kafka=KafkaSettings(), s3=S3), paths, brokers=1, net=NET)
    quiet = lambda _m: None  # noqa: E731
    # In a thread: `up` and `down` run asyncio.run, which would reset this thread's
    # pytest-asyncio loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(stack.down, quiet).result()  # a crashed run's processes and namespaces
        pool.submit(stack.up, quiet, 120).result()
        try:
            yield stack
        finally:
            pool.submit(stack.down, quiet).result()


async def test_a_zombie_front_and_sinks_cut_from_storage_lose_and_duplicate_nothing(
    hosts_stack: LocalStack, tmp_path: Path
) -> None:
    # 12 s: past the 6 s session, so front2 takes the zombie's partitions and fences it.
    steps = fixed_schedule(["zombie_front", "sink_minio"], start_s=6.0, duration_s=12.0, gap_s=4.0)
    plan = NetChaosPlan(tuple(steps), guarantee="exactly_once", rate=2.0, fronts=2, synths=1, tail_s=3.0)
    prefix = f"netsuite{uuid.uuid4().hex[:8]}-"  # the hosts' broker and bucket outlive a run
    run = NetChaosRun(
        hosts_stack, S3, plan, prefix=prefix, say=lambda m: print(m, file=sys.stderr), log_dir=tmp_path
    )
    report = await run.run()
    print(markdown(report))
    assert len(report.sent) >= 40, "the load did not run through the faults"
    assert [f.nemesis for f in report.faults] == ["zombie_front", "sink_minio"]
    assert all(f.healed > f.started for f in report.faults)
    assert report.settled, f"not settled {plan.settle_s:.0f} s after the last heal"
    assert {v.invariant: v.counterexamples for v in report.verdicts if not v.ok} == {}
