"""Turn CLI input (text arguments, stdin, a JSONL file) into validated requests.

A bad JSONL line never sinks the batch: good lines become requests, bad ones are reported
with their line number and the contract's one-line reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from streamtts.schemas import ContractError, TTSRequest


@dataclass(frozen=True)
class BadLine:
    line_no: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line_no}: {self.reason}"


@dataclass(frozen=True)
class ParsedInput:
    requests: list[TTSRequest]
    bad_lines: list[BadLine]


def request_from_fields(fields: Mapping[str, Any], defaults: Mapping[str, Any]) -> TTSRequest:
    """Build a request from user fields over CLI defaults; generated id/created_at if absent."""
    merged: dict[str, Any] = {k: v for k, v in defaults.items() if v is not None}
    merged.update(fields)
    text = merged.pop("text", None)
    if not isinstance(text, str):
        raise ContractError("request", "text", "missing", "is required but missing")
    return TTSRequest.new(text, **merged)


def parse_jsonl(lines: Iterable[bytes | str], defaults: Mapping[str, Any]) -> ParsedInput:
    requests: list[TTSRequest] = []
    bad: list[BadLine] = []
    for line_no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as err:
            bad.append(BadLine(line_no, f"not valid JSON ({err})"))
            continue
        if not isinstance(obj, dict):
            bad.append(BadLine(line_no, f"expected a JSON object, got {type(obj).__name__}"))
            continue
        try:
            requests.append(request_from_fields(obj, defaults))
        except ContractError as err:
            bad.append(BadLine(line_no, str(err)))
    return ParsedInput(requests, bad)
