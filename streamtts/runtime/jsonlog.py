"""Structured JSON logs: one orjson-encoded event per line on stderr.

`log_event(logger, "event_name", request_id=..., ...)` puts the fields at the top level of
the JSON object, so log pipelines can index them without parsing messages.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import Any, Protocol

import orjson

# LogRecord's own attributes are not event fields; uvicorn adds an ANSI-coloured duplicate.
_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",
}
TEXT_SNIPPET_CHARS = 40
# Credentials that can ride in a URL (WebSocket clients pass `?api_key=`; presigned URLs carry
# signatures): masked in every event, whichever logger wrote it (uvicorn's access log too).
_SECRET_IN_URL = re.compile(r"(?i)\b(api_key|apikey|token|X-Amz-Signature|X-Amz-Credential)=[^&\s\"']+")


def redact(text: str) -> str:
    return _SECRET_IN_URL.sub(lambda m: f"{m.group(1)}=****", text)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": redact(record.getMessage()),
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                event[key] = redact(value) if isinstance(value, str) else value
        if record.exc_info and record.exc_info[0] is not None:
            event["exc_class"] = record.exc_info[0].__name__
            event["exc"] = self.formatException(record.exc_info)[-2000:]
        return orjson.dumps(event, default=str).decode()


def configure(level: str = "INFO", *, quiet_clients: bool = True) -> None:
    """Route all logging to stderr as JSON lines.

    quiet_clients: CLI commands print one clear line on failure, so client-library chatter is
    muted (CRITICAL); long-running services keep the libraries' warnings (WARNING+).
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    client_level = logging.CRITICAL if quiet_clients else logging.WARNING
    for name in ("aiokafka", "kafka", "faust", "mode", "urllib3"):
        logging.getLogger(name).setLevel(logging.DEBUG if level.upper() == "DEBUG" else client_level)
    # phonemizer warns "words count mismatch" for every CJK clause: noise, not a problem.
    logging.getLogger("phonemizer").setLevel(logging.ERROR)


def snippet(text: str, limit: int = TEXT_SNIPPET_CHARS) -> str:
    """Truncate user text for logs: enough to recognise, not enough to leak a document."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Positioned(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...


def record_position(record: _Positioned) -> dict[str, Any]:
    """A Kafka record's place as log fields (topic, partition, offset): how every event about
    one record says which, so an operator can find it with `streamtts replay` or kcat."""
    return {"topic": record.topic, "partition": record.partition, "offset": record.offset}


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    logger.log(level, event, extra=fields)
