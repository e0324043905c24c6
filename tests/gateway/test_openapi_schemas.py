"""JSON Schema 2020-12 (pydantic) → OpenAPI 3.0 schema objects (pure, no gateway)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from streamtts.gateway.openapi_schemas import model_schema


class _Inner(BaseModel):
    size: int


class _Outer(BaseModel):
    name: str | None = None
    kind: Literal["audio"] = "audio"
    inner: _Inner
    maybe: _Inner | None = None


def test_nullables_consts_and_references_speak_openapi_3_0() -> None:
    components: dict[str, object] = {}
    schema = model_schema(_Outer, components)
    props = schema["properties"]
    assert props["name"] == {"type": "string", "nullable": True, "default": None}
    assert props["kind"] == {"enum": ["audio"], "type": "string", "default": "audio"}
    assert props["inner"] == {"$ref": "#/components/schemas/_Inner"}
    assert props["maybe"] == {
        "allOf": [{"$ref": "#/components/schemas/_Inner"}],
        "default": None,
        "nullable": True,
    }
    assert components == {
        "_Inner": {"properties": {"size": {"type": "integer"}}, "required": ["size"], "type": "object"}
    }
    assert "title" not in schema and "$defs" not in schema
