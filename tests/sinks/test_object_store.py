"""Object-store values and faults: free-form request values stay header-safe, and a refusal
that retrying cannot fix is told apart from an outage."""

from __future__ import annotations

import urllib3
from minio.error import S3Error, ServerError

from streamtts.sinks.object_store import is_transient_storage_error, metadata_value


def test_metadata_values_are_header_safe() -> None:
    for hostile in ("jm_kumo:0.7\n+jf_alpha:0.3", "a\r\nX-Injected: 1", "声音", "x" * 10):
        encoded = metadata_value(hostile)
        assert encoded.isascii() and "\n" not in encoded and "\r" not in encoded and " " not in encoded
    assert metadata_value("jm_kumo") == "jm_kumo"


def _s3(code: str) -> S3Error:
    return S3Error(None, code, "message", "resource", "request-id", "host-id")  # type: ignore[arg-type]


def test_outages_are_transient_and_refusals_are_not() -> None:
    assert is_transient_storage_error(urllib3.exceptions.MaxRetryError(None, "/", "refused"))  # type: ignore[arg-type]
    assert is_transient_storage_error(ConnectionRefusedError())
    assert is_transient_storage_error(ServerError("503", 503))
    assert is_transient_storage_error(_s3("SlowDown"))
    assert not is_transient_storage_error(ValueError("Invalid header value"))
    assert not is_transient_storage_error(_s3("AccessDenied"))
    assert not is_transient_storage_error(_s3("NoSuchBucket"))
