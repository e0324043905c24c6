"""`streamtts run`: start pipeline stages (all by default) in this process."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "run pipeline stages (all in one process by default)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from streamtts.runtime.topology import TOPOLOGY
    from streamtts.schemas.names import POOLS

    p.add_argument(
        "--stage",
        action="append",
        choices=[spec.name for spec in TOPOLOGY],
        help="stage to run; repeat for several (default: all)",
    )
    p.add_argument(
        "--pool",
        action="append",
        choices=POOLS,
        help="synthesize pool(s) to serve (default: both)",
    )
    p.add_argument(
        "--release",
        metavar="NAME",
        help="synthesize release to serve (default: $STREAMTTS_RELEASE or stable; see `streamtts release`)",
    )
    p.add_argument(
        "--log-level",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="default: $STREAMTTS_LOG_LEVEL or INFO",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import asyncio
    import os
    from dataclasses import replace

    from streamtts.runtime import jsonlog
    from streamtts.runtime.pipeline_settings import PipelineSettings
    from streamtts.runtime.settings import Settings
    from streamtts.runtime.topology import TOPOLOGY
    from streamtts.schemas.names import POOLS
    from streamtts.worker import Worker
    from streamtts.worker_run import run_until_signalled

    jsonlog.configure(args.log_level or os.environ.get("STREAMTTS_LOG_LEVEL", "INFO"), quiet_clients=False)
    worker = Worker(
        args.stage or [spec.name for spec in TOPOLOGY],
        Settings.from_env(),
        _with_release(PipelineSettings.from_env(), args.release, replace),
        pools=args.pool or list(POOLS),
    )
    asyncio.run(run_until_signalled(worker))
    return 0


def _with_release(pipeline: Any, release: str | None, replace: Any) -> Any:
    """--release wins over the environment; validated like STREAMTTS_RELEASE."""
    return pipeline.replace(release=release) if release else pipeline
