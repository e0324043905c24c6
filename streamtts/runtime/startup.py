"""Start-up is a fault window too: every step that talks to Kafka is bounded, a failed attempt
is unwound and retried with backoff, and past the start-up bound the process ends with one
line naming what it could not reach, so its supervisor restarts it.

A worker whose broker died while it started used to hang forever, alive and not ready (a
faust app half started when the broker went away never finished its start), or exit with a
raw traceback (`Unable to bootstrap`). Neither told the supervisor or the operator anything.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from dataclasses import dataclass

from aiokafka import errors as kafka_errors

from streamtts.errors import ConfigError, StreamTTSError


class StartupFailed(StreamTTSError):
    """The worker could not start within its bound: exit non-zero, the supervisor restarts it."""


class StepTimedOut(Exception):
    """A start-up step overran its bound (a client the broker's death left waiting)."""


@dataclass(frozen=True)
class StartupPolicy:
    bound_s: float = 120.0
    """The whole start-up (its Kafka steps and their retries) may take this long."""
    step_timeout_s: float = 20.0
    """One step may take this long before the attempt is abandoned and retried."""
    first_backoff_s: float = 0.5
    max_backoff_s: float = 2.0
    """Retries back off exponentially up to this: a broker back after an outage is found
    within ~this long, and a fleet of restarting workers does not hammer it in step."""

    def backoffs(self, rng: random.Random | None = None) -> Iterator[float]:
        """Delays before each retry: doubling from `first_backoff_s` to `max_backoff_s`, each
        drawn from [half, whole] of its step (jitter decorrelates a fleet restarting at once)."""
        rng = rng or random.Random()
        step = self.first_backoff_s
        while True:
            yield step * (0.5 + rng.random() / 2)
            step = min(step * 2, self.max_backoff_s)


class StartupClock:
    """The deadline of one worker's start-up, on the event loop's clock."""

    def __init__(self, policy: StartupPolicy) -> None:
        self.policy = policy
        self._deadline = asyncio.get_running_loop().time() + policy.bound_s

    def remaining(self) -> float:
        return max(0.0, self._deadline - asyncio.get_running_loop().time())

    def step_bound(self) -> float:
        """A step's bound: its own timeout, never past the start-up deadline."""
        return min(self.policy.step_timeout_s, self.remaining())


def describe(err: BaseException) -> str:
    """One line for an error: a start-up step's, a failed delivery's (some Kafka errors have an
    empty str)."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    name = type(err).__name__
    if text.startswith(name):  # aiokafka's errors name themselves
        return text[:240]
    return f"{name}: {text}"[:240] if text else name


_REFUSALS: tuple[tuple[type[BaseException], str], ...] = (
    (
        kafka_errors.InvalidSessionTimeoutError,
        "the brokers refuse the group session timeout STREAMTTS_SESSION_TIMEOUT_S={session:g} s: "
        "it must lie within their group.min.session.timeout.ms..group.max.session.timeout.ms "
        "(6–1800 s unless changed)",
    ),
    (
        kafka_errors.InvalidTransactionTimeout,
        "the brokers refuse the producers' transaction timeout: it must not exceed their "
        "transaction.max.timeout.ms",
    ),
    (kafka_errors.GroupAuthorizationFailedError, "the brokers do not authorize this worker's consumer group"),
    (kafka_errors.TopicAuthorizationFailedError, "the brokers do not authorize this worker's topics"),
    (
        kafka_errors.TransactionalIdAuthorizationFailed,
        "the brokers do not authorize this worker's transactional id",
    ),
    (kafka_errors.ClusterAuthorizationFailedError, "the brokers do not authorize this worker on the cluster"),
)


def refusal(err: BaseException, *, session_timeout_s: float) -> ConfigError | None:
    """A broker's answer that no retry can change (a setting it refuses, a permission it does
    not grant) as a configuration error, so start-up ends at once with that line instead of
    retrying until its bound and blaming the network."""
    for kind, message in _REFUSALS:
        if isinstance(err, kind):
            return ConfigError(f"{message.format(session=session_timeout_s)} ({describe(err)})")
    return None
