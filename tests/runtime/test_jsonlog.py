"""JSON log lines never carry credentials, whichever logger wrote them."""

from __future__ import annotations

import logging

import orjson

from streamtts.runtime.jsonlog import JsonFormatter


def _line(msg: str, *args: object, **extra: object) -> dict:
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, msg, args, None)
    for k, v in extra.items():
        setattr(record, k, v)
    return orjson.loads(JsonFormatter().format(record))


def test_api_keys_in_urls_are_masked_in_messages_and_fields() -> None:
    # uvicorn's access log: the path (with the query) is an argument of the message.
    event = _line(
        '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", "/v1/stream?api_key=sk-live-123&x=1", "1.1", 101
    )
    assert "sk-live-123" not in event["event"] and "api_key=****&x=1" in event["event"]
    field = _line("presigned", url="http://s3/x?X-Amz-Signature=abcdef&X-Amz-Credential=AKIA/2026")
    assert "abcdef" not in field["url"] and "AKIA" not in field["url"]
