"""Wire formats: how a contract becomes a Kafka record (value + headers), and back.

Two formats, chosen by the writer (`wire_format`), both read by every reader:

- ``v1``: the JSON envelope (`Contract.to_bytes`), audio base64 inside, no headers.
- ``cloudevents``: the CloudEvents 1.0 Kafka protocol binding in *binary mode*. PCM and audio
  chunks carry their audio as the record value itself (`tts.pcm`: raw s16le mono PCM,
  `content-type: audio/L16;rate=R;endianness=little-endian` (mono: RFC 2586's default); `tts.audio` and reply
  topics: the encoded chunk, `content-type` of its format), and every other field of the
  envelope as a ``ce_`` header (see `docs/wire-format.md` for the mapping). JSON contracts
  keep their JSON body and gain the CloudEvents headers with `content-type: application/json`.

A reader tells a chunk's format by the `content-type` header: absent or JSON → the JSON body is the
contract; anything else → a binary-mode chunk rebuilt from its headers. A JSON contract is read
from its value whatever its headers say. Pure: no Kafka here.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from types import MappingProxyType
from typing import Any, Final, Literal, TypeVar

import orjson
from pydantic import BaseModel

from streamtts.schemas.base import Contract
from streamtts.schemas.chunks import AudioChunk, FilePart, PcmChunk
from streamtts.schemas.exceptions import ContractError
from streamtts.schemas.headers import header_pairs
from streamtts.schemas.request import TTSRequest

WireFormat = Literal["v1", "cloudevents"]
WIRE_FORMATS: Final[tuple[WireFormat, ...]] = ("v1", "cloudevents")
DEFAULT_WIRE_FORMAT: Final[WireFormat] = "cloudevents"

SPECVERSION: Final = "1.0"
CE_PREFIX: Final = "ce_"
CONTENT_TYPE: Final = "content-type"
JSON_CONTENT_TYPE: Final = "application/json"
TYPE_PREFIX: Final = "dev.streamtts."
SOURCE_PREFIX: Final = "/streamtts"
MAX_HEADER_BYTES: Final = 64 * 1024
"""Bound on a binary-mode record's headers (names + values). A chunk whose headers would be
larger (thousands of words in one chunk) is written as a v1 record instead: readers take both,
so nothing is cut and the record stays far below Kafka's 1 MB."""
PCM_CHANNELS: Final = 1

C = TypeVar("C", bound=Contract)

CONTEXT_DEFAULTED: Final = ("language", "voice", "format", "sample_rate", "speed", "priority", "delivery")
"""Request-context fields a PCM record's `ce_request` may leave out at the request's default
(`TTSRequest`'s: "auto", "auto", "mp3", 24000, 1.0, "normal", {}); the reader restores them.
Most requests leave them all at the default and every PCM record repeats them (~100 bytes).
This release reads records without them but still writes them: readers of the previous
release require them, and a rolling upgrade must lose nothing. The next release can leave them
out (`COMPACT_CONTEXT`), as this one left out what the previous one already read."""
COMPACT_CONTEXT: Final = False
"""Whether writers leave the defaults out (see `CONTEXT_DEFAULTED`): off for one release."""


@cache
def _context_defaults() -> Mapping[str, Any]:
    """A constant, computed once: read-only, and its nested values are copied by the reader
    that puts them into a record (one shared `{}` must never become every record's)."""
    # As the record's own dump writes them: a nested model at its default is `{}`.
    request = TTSRequest.model_construct()
    return MappingProxyType(
        {
            name: value.model_dump(mode="json", exclude_defaults=True)
            if isinstance(value := getattr(request, name), BaseModel)
            else value
            for name in CONTEXT_DEFAULTED
        }
    )


@dataclass(frozen=True)
class BinaryLayout:
    """How a chunk contract sits in binary mode: which field is the value, which the time."""

    payload: str
    """The bytes field that is the record value."""
    time: str
    """The field that is `ce_time`."""
    source: str
    """`ce_source`: the stage that writes it."""


BINARY: Final[dict[str, BinaryLayout]] = {
    PcmChunk.contract_name: BinaryLayout("pcm", "synthesized_at", SOURCE_PREFIX + "/synthesize"),
    AudioChunk.contract_name: BinaryLayout("audio", "encoded_at", SOURCE_PREFIX + "/encode"),
    # A file part's value is its audio in whichever form it carries: `content-type` says which
    # (the format's, or audio/L16 for PCM; a part carrying none is written as an empty PCM).
    FilePart.contract_name: BinaryLayout("audio", "synthesized_at", SOURCE_PREFIX + "/encode"),
}
SUBJECT_FIELD: Final = "request_id"
"""The field that is `ce_subject` (every chunk's request)."""


@dataclass(frozen=True)
class Record:
    """A contract as a Kafka record: its value, its headers and the format it was written in."""

    value: bytes
    headers: list[tuple[str, bytes]]
    wire_format: WireFormat

    @property
    def size(self) -> int:
        """Bytes of value and headers (names and values), what the record adds to the log
        before Kafka's own framing."""
        return len(self.value) + sum(len(k) + len(v) for k, v in self.headers)


def extension_name(field: str) -> str:
    """A contract field's CloudEvents extension name: lower-case letters and digits only."""
    return field.replace("_", "").lower()


def event_type(contract: type[Contract] | Contract) -> str:
    """`ce_type` of a contract: `dev.streamtts.<contract>.v<schema_version>`."""
    return f"{TYPE_PREFIX}{contract.contract_name}.v1"


def pcm_content_type(sample_rate: int) -> str:
    # No `channels=`: RFC 2586's default is 1 (mono), and every reader here defaults to it;
    # `endianness=` stays (L16's default is big-endian).
    return f"audio/L16;rate={sample_rate};endianness=little-endian"


@cache
def _text_fields(cls: type[Contract]) -> frozenset[str]:
    """Fields whose JSON value is a string: their header is the raw text, the others JSON."""
    props = cls.model_json_schema(mode="serialization").get("properties", {})
    out = set()
    for name, schema in props.items():
        branches = schema.get("anyOf", [schema])
        if any(b.get("type") == "string" for b in branches):
            out.add(name)
    return frozenset(out)


@cache
def _field_of_extension(cls: type[Contract]) -> Mapping[str, str]:
    """A constant per contract, computed once (read-only): CloudEvents extension → field."""
    return MappingProxyType({extension_name(f): f for f in cls.model_fields})


def _event_id(contract: Contract) -> str:
    """Unique per (source, id): a chunk's or segment's place in its request, a request's or
    result's id, else a random one (config, audit and control records)."""
    request_id = getattr(contract, "request_id", None)
    if not isinstance(request_id, str) or contract.contract_name in ("control", "audit"):
        return str(uuid.uuid4())
    parts = [request_id]
    for name in ("seq", "part"):
        value = getattr(contract, name, None)
        if isinstance(value, int):
            parts.append(str(value))
    return "/".join(parts)


def _event_time(contract: Contract) -> str:
    for name in ("synthesized_at", "encoded_at", "completed_at", "created_at", "at", "updated_at"):
        value = getattr(contract, name, None)
        if isinstance(value, datetime):
            return value.isoformat()
    return datetime.now(UTC).isoformat()


def _text(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else orjson.dumps(value)


def encode(
    contract: Contract,
    wire_format: WireFormat = DEFAULT_WIRE_FORMAT,
    *,
    content_type: str | None = None,
    source: str | None = None,
    compact_context: bool = COMPACT_CONTEXT,
) -> Record:
    """`contract` as a record in `wire_format`. `content_type` names an audio chunk's encoding
    (required in binary mode for `AudioChunk`); `source` overrides `ce_source`;
    `compact_context` leaves a PCM record's context defaults out (see `CONTEXT_DEFAULTED`)."""
    if wire_format == "v1":
        return Record(contract.to_bytes(), [], "v1")
    layout = BINARY.get(contract.contract_name)
    if layout is None:
        headers = _attributes(contract, source or SOURCE_PREFIX, _event_time(contract))
        headers.append((CONTENT_TYPE, JSON_CONTENT_TYPE.encode()))
        return Record(contract.to_bytes(), headers, "cloudevents")
    return _binary(contract, layout, content_type, source, compact_context)


def _attributes(contract: Contract, source: str, time: str) -> list[tuple[str, bytes]]:
    return [
        ("ce_specversion", SPECVERSION.encode()),
        ("ce_id", _event_id(contract).encode()),
        ("ce_source", source.encode()),
        ("ce_type", event_type(contract).encode()),
        ("ce_time", time.encode()),
    ]


def _binary(
    contract: Contract,
    layout: BinaryLayout,
    content_type: str | None,
    source: str | None,
    compact_context: bool,
) -> Record:
    # The payload is left out of the dump (it would be base64-encoded only to be dropped).
    fields = contract.model_dump(
        mode="json", exclude_none=True, exclude_defaults=True, exclude={layout.payload, "schema_version"}
    )
    payload: bytes = getattr(contract, layout.payload)
    time = fields.pop(layout.time)
    subject = fields.pop(SUBJECT_FIELD)
    if isinstance(contract, PcmChunk):
        content_type = pcm_content_type(contract.sample_rate)
    elif content_type is None:
        raise ValueError(f"{contract.contract_name} in binary mode needs its content type")
    if isinstance(contract, PcmChunk):
        # Each fact once: the rate (and mono) are in the content type, the request's id is
        # `ce_subject`. The release before this one reads records without them (and the first
        # cloudevents builds, which required them, are two releases back).
        fields.pop("sample_rate", None)
        request = fields.get("request")
        if isinstance(request, dict):
            request.pop(SUBJECT_FIELD, None)
            if compact_context:
                for name, default in _context_defaults().items():
                    if name in request and request[name] == default:
                        del request[name]
    headers = _attributes(contract, source or layout.source, time)
    headers.append(("ce_subject", subject.encode()))
    headers += [(CE_PREFIX + extension_name(name), _text(value)) for name, value in fields.items()]
    headers.append((CONTENT_TYPE, content_type.encode()))
    if sum(len(k) + len(v) for k, v in headers) > MAX_HEADER_BYTES:
        return Record(contract.to_bytes(), [], "v1")  # bounded: see MAX_HEADER_BYTES
    return Record(payload, headers, "cloudevents")


def is_binary(headers: object) -> bool:
    """Whether a record is a binary-mode chunk (its `content-type` is set and not JSON)."""
    content_type = _content_type(header_pairs(headers))
    return content_type is not None and not content_type.startswith(JSON_CONTENT_TYPE)


def _content_type(pairs: Iterable[tuple[str, bytes]]) -> str | None:
    for name, value in pairs:
        if name.lower() == CONTENT_TYPE:
            return value.decode("utf-8", "replace").strip().lower()
    return None


def decode(cls: type[C], value: bytes | None, headers: object = None) -> C:
    """The contract of a record in either format (the dual reader). Raises ContractError."""
    layout = BINARY.get(cls.contract_name)
    if layout is None:  # a JSON contract: its value is its JSON whatever a writer's headers say
        return cls.from_bytes(value)
    pairs = header_pairs(headers)
    content_type = _content_type(pairs)
    if content_type is None or content_type.startswith(JSON_CONTENT_TYPE):
        return cls.from_bytes(value)
    return _from_binary(cls, layout, value, pairs)


def _from_binary(
    cls: type[C], layout: BinaryLayout, value: bytes | None, pairs: tuple[tuple[str, bytes], ...]
) -> C:
    name = cls.contract_name
    attrs = {k[len(CE_PREFIX) :].lower(): v for k, v in pairs if k.lower().startswith(CE_PREFIX)}
    if attrs.get("specversion") != SPECVERSION.encode():
        raise ContractError(name, "ce_specversion", "unsupported_version", f"must be {SPECVERSION}")
    if attrs.get("type") != event_type(cls).encode():
        got = attrs.get("type", b"").decode("utf-8", "replace")
        raise ContractError(name, "ce_type", "unsupported_version", f"{got!r} is not {event_type(cls)}")
    channels = attrs.pop("channels", None)  # written by the first cloudevents builds
    if cls is PcmChunk and channels not in (None, b"1"):
        raise ContractError(name, "ce_channels", "unsupported_channels", "PCM must be mono (1 channel)")
    obj: dict[str, Any] = {layout.payload: value if value is not None else b""}
    if cls is PcmChunk:
        obj.update(_pcm_format(name, _content_type(pairs) or ""))
    fields, text = _field_of_extension(cls), _text_fields(cls)
    for attr, raw in attrs.items():
        if attr in ("specversion", "type", "source", "id"):
            continue
        field = {"time": layout.time, "subject": SUBJECT_FIELD}.get(attr) or fields.get(attr)
        if field is None or field in (layout.payload, "schema_version"):
            continue  # an extension some other writer added: not ours to judge
        try:
            obj[field] = raw.decode("utf-8") if field in text else orjson.loads(raw)
        except (UnicodeDecodeError, orjson.JSONDecodeError):
            raise ContractError(name, f"ce_{attr}", "invalid_header", "is not valid UTF-8 / JSON") from None
    request = obj.get("request")
    if isinstance(request, dict) and SUBJECT_FIELD in obj:
        request.setdefault(SUBJECT_FIELD, obj[SUBJECT_FIELD])
        if cls is PcmChunk:
            for name, default in _context_defaults().items():
                if name not in request:
                    request[name] = copy.deepcopy(default)
    return cls.from_obj(obj)


def _pcm_format(name: str, content_type: str) -> dict[str, Any]:
    """`sample_rate` from a PCM chunk's content type (`audio/L16;rate=R;channels=1;…`)."""
    params = dict(p.strip().split("=", 1) for p in content_type.split(";")[1:] if "=" in p)
    if params.get("channels", "1") != "1":
        raise ContractError(name, CONTENT_TYPE, "unsupported_channels", "PCM must be mono (1 channel)")
    if params.get("endianness", "little-endian") != "little-endian":
        raise ContractError(name, CONTENT_TYPE, "unsupported_encoding", "PCM must be little-endian")
    rate = params.get("rate", "")
    if not rate.isdigit():
        raise ContractError(name, CONTENT_TYPE, "invalid_header", f"{content_type!r} has no rate=")
    return {"sample_rate": int(rate)}


def headers_size(headers: Iterable[tuple[str, bytes]]) -> int:
    return sum(len(k) + len(v) for k, v in headers)


def headers_schema(cls: type[Contract]) -> dict[str, Any]:
    """JSON Schema of a contract's record headers in binary mode (names → UTF-8 text values).

    JSON-valued extensions say so with `contentMediaType` and give the field's schema as
    `contentSchema`; other headers (tracing, replay, the dead-letter ones) may ride along."""
    model = cls.model_json_schema(mode="serialization")
    props: dict[str, Any] = {
        "ce_specversion": {"const": SPECVERSION},
        "ce_id": {"type": "string", "minLength": 1},
        "ce_source": {"type": "string", "format": "uri-reference", "pattern": f"^{SOURCE_PREFIX}"},
        "ce_type": {"const": event_type(cls)},
        "ce_time": {"type": "string", "format": "date-time"},
    }
    required = list(props)
    layout = BINARY.get(cls.contract_name)
    if layout is None:
        props[CONTENT_TYPE] = {"const": JSON_CONTENT_TYPE, "description": "The value is the contract's JSON."}
        schema: dict[str, Any] = {
            "type": "object",
            "properties": props,
            "required": [*required, CONTENT_TYPE],
        }
        return _headers_document(cls, schema, {})
    fields = model.get("properties", {})
    must = set(model.get("required", [])) - {layout.payload, layout.time, SUBJECT_FIELD, "schema_version"}
    props["ce_time"]["description"] = f"The contract's `{layout.time}`."
    props["ce_subject"] = {**fields[SUBJECT_FIELD], "description": "The request id (`request_id`)."}
    required.append("ce_subject")
    defs = dict(model.get("$defs", {}))
    skip = {layout.payload, layout.time, SUBJECT_FIELD, "schema_version"}
    for name, field_schema in fields.items():
        if name in skip:
            continue
        if cls is PcmChunk and name == "sample_rate":
            continue  # the content type's `rate=` (earlier writers also wrote `ce_samplerate`)
        field_schema = _without_subject(field_schema, defs)
        header = CE_PREFIX + extension_name(name)
        described = {"description": field_schema.get("description", f"The contract's `{name}`.")}
        if name in _text_fields(cls):
            branch = next(b for b in field_schema.get("anyOf", [field_schema]) if b.get("type") == "string")
            props[header] = {**{k: v for k, v in branch.items() if k != "default"}, **described}
        else:
            props[header] = {
                "type": "string",
                "contentMediaType": JSON_CONTENT_TYPE,
                "contentSchema": {
                    k: v for k, v in field_schema.items() if k not in ("default", "description")
                },
                **described,
            }
        if name in must:
            required.append(header)
    if cls is PcmChunk:
        props["ce_channels"] = {
            "const": str(PCM_CHANNELS),
            "description": "Written by earlier releases only: the content type's `channels=` says it.",
        }
        props[CONTENT_TYPE] = {
            "type": "string",
            "pattern": r"^audio/L16;rate=\d+;(channels=1;)?endianness=little-endian$",
        }
    else:
        props[CONTENT_TYPE] = {"type": "string", "pattern": r"^audio/", "description": "The chunk's format."}
    required.append(CONTENT_TYPE)
    schema = {"type": "object", "properties": props, "required": required}
    return _headers_document(cls, schema, defs)


def _without_subject(field_schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A nested model with its own `request_id` (the request context) goes in a header
    without it (it is `ce_subject`), and without the fields at the request's defaults
    (`CONTEXT_DEFAULTED`) when a writer leaves them out: its schema there does not require them."""
    ref = field_schema.get("$ref", "")
    target = defs.get(ref.rsplit("/", 1)[-1]) if ref.startswith("#/$defs/") else None
    if not target or SUBJECT_FIELD not in target.get("required", []):
        return field_schema
    name = ref.rsplit("/", 1)[-1] + "InHeader"
    defs[name] = {
        **target,
        "required": [r for r in target["required"] if r != SUBJECT_FIELD and r not in CONTEXT_DEFAULTED],
        "description": (
            f"{target.get('description', '')} Its `{SUBJECT_FIELD}` is `ce_subject`; "
            f"{', '.join(CONTEXT_DEFAULTED)} may be left out at the request's defaults."
        ).strip(),
    }
    return {**field_schema, "$ref": f"#/$defs/{name}"}


def _headers_document(cls: type[Contract], schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://streamtts.dev/schemas/v1/{cls.contract_name}.headers.json",
        "title": f"{cls.contract_name} record headers (CloudEvents 1.0, Kafka binary mode)",
        **schema,
        "additionalProperties": {"type": "string"},
    }
    if defs:
        doc["$defs"] = defs
    return doc
