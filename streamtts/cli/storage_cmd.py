"""`streamtts storage apply|plan`: the audio bucket and its retention lifecycle rules as code."""

from __future__ import annotations

import argparse

HELP = "create the audio bucket, apply tenants' retention as lifecycle rules"


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    a = actions.add_parser("apply", help="create the bucket, reconcile the lifecycle rules")
    a.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
    a.set_defaults(func=_run)
    pl = actions.add_parser("plan", help="print what apply would change (same as apply --dry-run)")
    pl.set_defaults(func=_run, dry_run=True)


def _run(args: argparse.Namespace) -> int:
    import urllib3
    from minio.error import S3Error

    from streamtts.errors import InfraError
    from streamtts.features.retention import lifecycle as storage
    from streamtts.features.retention.policy import RetentionPolicy
    from streamtts.runtime.pipeline_settings import PipelineSettings
    from streamtts.runtime.s3 import make_minio
    from streamtts.runtime.settings import Settings

    settings = Settings.from_env()
    pipeline = PipelineSettings.from_env()
    desired = storage.desired_rules(RetentionPolicy.of(pipeline), (pipeline.render_cache.prefix,))
    client = make_minio(settings.s3, connect_s=5.0, read_s=30.0, retries=2, pool=2)
    bucket = settings.s3.bucket
    try:
        the_plan = storage.plan(client, bucket, desired)
        if not args.dry_run:
            storage.apply(client, the_plan)
    except S3Error as err:
        raise InfraError(f"object storage refused ({err.code}): {err.message}") from None
    except (urllib3.exceptions.HTTPError, OSError) as err:
        raise InfraError(
            f"cannot reach object storage at {settings.s3.endpoint} ({type(err).__name__}); "
            "is it running? try `streamtts infra up`"
        ) from None
    verb = "would " if args.dry_run else ""
    if the_plan.create_bucket:
        print(f"{verb}create   bucket {bucket}")
    for spec in the_plan.create:
        print(f"{verb}create   {spec.rule_id}: {spec.describe()}")
    for was, spec in the_plan.alter:
        print(f"{verb}alter    {spec.rule_id}: {was} -> {spec.describe()}")
    for rule_id in the_plan.delete:
        print(f"{verb}delete   {rule_id}")
    print(
        f"bucket {bucket}: {len(the_plan.create)} rules created, {len(the_plan.alter)} altered, "
        f"{len(the_plan.delete)} deleted, {len(the_plan.unchanged)} unchanged, "
        f"{len(the_plan.others)} of other owners kept"
    )
    return 0
