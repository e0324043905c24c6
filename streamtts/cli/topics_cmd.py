"""`streamtts topics apply|plan`: reconcile the cluster with infra/topics.yaml."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamtts.infra.topics import TopicProfile, TopicSpec
    from streamtts.runtime.settings import Settings


HELP = "create/reconcile Kafka topics from infra/topics.yaml"


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, helptext in (
        ("apply", "create missing topics, fix drift"),
        ("plan", "show drift only"),
    ):
        a = actions.add_parser(name, help=helptext)
        a.add_argument("--spec", help="topic spec file (default: infra/topics.yaml)")
        a.add_argument("--prefix", help="topic name prefix (default: $STREAMTTS_TOPIC_PREFIX)")
        a.add_argument(
            "--profile",
            default="auto",
            help="spec profile (e.g. replicated: RF 3, min.insync.replicas 2); default auto: the "
            "one the cluster's broker count picks; none: the plain spec",
        )
        a.set_defaults(func=_run, dry_run=(name == "plan"))


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from streamtts.infra.topics import SPEC_PATH, load_profiles, load_spec, topology_gaps
    from streamtts.runtime.settings import Settings
    from streamtts.runtime.topics import TopicNames

    settings = Settings.from_env()
    prefix = settings.kafka.topic_prefix if args.prefix is None else args.prefix
    spec_path = Path(args.spec) if args.spec else SPEC_PATH
    specs = load_spec(spec_path, prefix=prefix)
    profiles = load_profiles(spec_path)
    # A spec file that misses a topic the stages use is drift against the code: say so.
    gaps = topology_gaps(specs, TopicNames(prefix))
    for line in gaps:
        print(f"GAP      {line}")
    code = asyncio.run(_apply(settings, specs, args.dry_run, args.profile, profiles))
    return code or (4 if gaps else 0)


async def _apply(
    settings: Settings,
    specs: list[TopicSpec],
    dry_run: bool,
    profile: str,
    profiles: dict[str, TopicProfile],
) -> int:
    from aiokafka.errors import KafkaError

    from streamtts.errors import InfraError
    from streamtts.infra.topics import apply_spec
    from streamtts.runtime.kafka import make_admin

    admin = make_admin(settings.kafka)
    try:
        try:
            await asyncio.wait_for(admin.start(), timeout=15)
        except (KafkaError, OSError, TimeoutError) as err:
            raise InfraError(
                f"cannot reach Kafka at {settings.kafka.bootstrap_servers} ({type(err).__name__}); "
                "is it running? try `streamtts infra up`"
            ) from None
        report = await apply_spec(admin, specs, dry_run=dry_run, profile=profile, profiles=profiles)
    finally:
        await admin.close()
    verb = "would " if dry_run else ""
    print(f"profile  {report.profile or 'none'}")
    for name in report.created:
        print(f"{verb}create   {name}")
    for name in report.partitions_grown:
        print(f"{verb}grow     {name}")
    for line in report.configs_altered:
        print(f"{verb}alter    {line}")
    for line in report.drift:
        print(f"DRIFT    {line}")
    print(
        f"{len(specs)} topics: {len(report.created)} created, {len(report.partitions_grown)} grown, "
        f"{len(report.configs_altered)} altered, {len(report.unchanged)} unchanged, {len(report.drift)} drift"
    )
    return 4 if report.drift else 0
