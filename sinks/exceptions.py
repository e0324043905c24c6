"""The sink's own failures: each carries its dead-letter reason (see `streamtts.errors`)."""

from __future__ import annotations

from streamtts.errors import RecordError, TransientError


class PartitionRevoked(Exception):
    """An output for a partition this sink no longer owns (revoked while its record was being
    handled): dropped — the partition's next owner reads the record again and redoes it."""


class StorageUnavailable(TransientError):
    """Object storage kept failing through every retry (a transient fault, dead-lettered)."""

    reason = "storage_unavailable"


class StorageRejected(RecordError):
    """Object storage refused this request's upload for good (e.g. a value it cannot carry):
    retrying cannot help, so it is dead-lettered at once."""

    reason = "storage_rejected"
