"""Replay tooling: re-drive dead letters, re-run requests, replay a time window.

Every replayed record carries `streamtts.replay.*` headers saying it is a replay and of
what; a compacted ledger topic remembers what was re-driven so repeating a replay does not
duplicate final outputs unless forced.
"""

from streamtts.producers.replay.dlq import DlqFilter, replay_dlq
from streamtts.producers.replay.options import ReplayOptions
from streamtts.producers.replay.requests import replay_requests, replay_window
from streamtts.producers.replay.summary import ReplaySummary

__all__ = ["DlqFilter", "ReplayOptions", "ReplaySummary", "replay_dlq", "replay_requests", "replay_window"]
