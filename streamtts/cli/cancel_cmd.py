"""`streamtts cancel ID`: stop a request (barge-in) and say what was spoken."""

from __future__ import annotations

import argparse
import asyncio
import sys

HELP = "cancel a request in flight (barge-in) and report what was spoken"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("request_id", metavar="ID", help="the request to cancel")
    p.add_argument("--tenant", default="default", help="the request's tenant (default: default)")
    p.add_argument("--played-ms", type=float, default=None, help="how much of the audio was played (ms)")
    p.add_argument("--wait", type=float, default=15.0, help="seconds to wait for the outcome (default 15)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from streamtts.errors import ConfigError

    if args.played_ms is not None and args.played_ms < 0:
        raise ConfigError("--played-ms must be ≥ 0")
    if args.wait <= 0:
        raise ConfigError("--wait must be > 0")
    return asyncio.run(_cancel(args))


async def _cancel(args: argparse.Namespace) -> int:
    from aiokafka.errors import KafkaError

    from streamtts.errors import ConfigError, InfraError
    from streamtts.producers.request_producer import RequestProducer
    from streamtts.producers.result_waiter import ResultTimeout, ResultWaiter
    from streamtts.runtime.settings import Settings
    from streamtts.schemas import ContractError, ControlMessage

    settings = Settings.from_env()
    try:
        ControlMessage.cancel(args.request_id, args.tenant, args.played_ms)  # a bad id: one line
    except ContractError as err:
        raise ConfigError(str(err)) from None
    waiter = ResultWaiter(settings.kafka)
    try:
        await waiter.start()  # attached first: the cancelled result cannot slip by
        async with RequestProducer(settings.kafka) as producer:
            await producer.cancel(args.request_id, args.tenant, args.played_ms)
        try:
            result = (await waiter.wait([args.request_id], args.wait))[args.request_id]
        except ResultTimeout:
            print(
                f"streamtts: no request {args.request_id} of tenant {args.tenant} finished within "
                f"{args.wait:g} s: unknown, already finished before the cancel, or still stopping",
                file=sys.stderr,
            )
            return 1
    except KafkaError as err:
        raise InfraError(
            f"cannot reach Kafka at {settings.kafka.bootstrap_servers} ({type(err).__name__})"
        ) from None
    finally:
        await waiter.stop()
    if result.status != "cancelled":
        print(f"{args.request_id} had already {result.status}: nothing to cancel")
        return 0
    words = f", {len(result.words_spoken)} words" if result.words_spoken is not None else ""
    print(f"{args.request_id} cancelled: {(result.spoken_ms or 0) / 1000:.2f} s spoken{words}")
    return 0
