"""Common machinery for the wire contracts: strict models, orjson (de)serialization.

Every contract is a frozen pydantic model with `extra="forbid"`, so unknown fields, missing
fields, wrong types and a wrong `schema_version` are all rejected with an error naming the
field. Pydantic gives us JSON Schema export for non-Python producers from the same definition.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, ClassVar, Self

import orjson
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    ValidationError,
    WithJsonSchema,
)

from streamtts.schemas.exceptions import ContractError

SCHEMA_VERSION = 1


class Contract(BaseModel):
    """Base of every message on Kafka. Subclasses set `contract_name`."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        str_strip_whitespace=False,
        validate_default=True,
    )
    contract_name: ClassVar[str] = "contract"

    def to_bytes(self) -> bytes:
        """Serialize to compact JSON bytes (orjson) for a Kafka record value."""
        return orjson.dumps(self.model_dump(mode="json", exclude_none=True))

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview | str | None) -> Self:
        """Parse and strictly validate a Kafka record value. Raises ContractError."""
        if data is None:
            raise ContractError(cls.contract_name, "", "empty", "record value is null (tombstone)")
        if isinstance(data, str):
            data = data.encode("utf-8", errors="surrogatepass")
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as err:
            reason = "invalid_utf8" if "utf-8" in str(err).lower() else "invalid_json"
            raise ContractError(cls.contract_name, "", reason, f"not valid JSON ({err})") from None
        return cls.from_obj(obj)

    @classmethod
    def from_obj(cls, obj: Any) -> Self:
        if not isinstance(obj, dict):
            raise ContractError(
                cls.contract_name,
                "",
                "not_an_object",
                f"expected a JSON object, got {type(obj).__name__}",
            )
        version = obj.get("schema_version")
        if version is not None and version != SCHEMA_VERSION:
            raise ContractError(
                cls.contract_name,
                "schema_version",
                "unsupported_version",
                f"version {version!r} is not supported (this worker reads {SCHEMA_VERSION})",
            )
        try:
            return cls.model_validate(obj)
        except ValidationError as err:
            raise _contract_error(cls.contract_name, err) from None


def _contract_error(contract: str, err: ValidationError) -> ContractError:
    first = err.errors(include_url=False)[0]
    field = ".".join(str(p) for p in first.get("loc", ()))
    kind = str(first.get("type", "invalid"))
    msg = str(first.get("msg", "invalid value"))
    if kind == "missing":
        msg = "is required but missing"
    elif kind == "extra_forbidden":
        msg = "is not a known field of this contract"
    more = err.error_count() - 1
    if more:
        msg += f" (and {more} more problem{'s' if more > 1 else ''})"
    return ContractError(contract, field, kind, msg)


def _b64_in(value: Any) -> Any:
    # On the wire audio is base64 text; in Python it is bytes. Accept both.
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (ValueError, TypeError):
            raise ValueError("must be standard base64") from None
    return value


AudioBytes = Annotated[
    bytes,
    BeforeValidator(_b64_in),
    PlainSerializer(lambda b: base64.b64encode(b).decode("ascii"), return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "contentEncoding": "base64"}),
]
"""Binary payload: bytes in Python, standard base64 in JSON."""
