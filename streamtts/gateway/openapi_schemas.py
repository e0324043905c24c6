"""OpenAPI 3.0 schema objects from pydantic models, so the document says what the code validates.

Pydantic writes JSON Schema 2020-12; OpenAPI 3.0 speaks an older dialect. The translation is
small: `anyOf [X, null]` becomes `nullable`, `const` a one-value `enum`, `$defs` move to
`components/schemas`, and the generated titles are dropped.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

_REF_PREFIX = "#/$defs/"
_COMPONENTS = "#/components/schemas/"


def model_schema(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    """`model`'s request (validation) schema in OpenAPI 3.0; the models it refers to are
    added to `components` under their own names.

    Raises:
        ValueError: a referenced model's name is already a different component.
    """
    schema = model.model_json_schema(mode="validation", ref_template=_REF_PREFIX + "{model}")
    for name, definition in schema.pop("$defs", {}).items():
        converted = to_openapi(definition)
        if components.get(name, converted) != converted:
            raise ValueError(f"two different schemas are named {name!r}")
        components[name] = converted
    return to_openapi(schema)


def field_schema(model: type[BaseModel], field: str) -> dict[str, Any]:
    """The OpenAPI 3.0 schema of one field of `model` (a pattern, an enum, a range)."""
    return to_openapi(model.model_json_schema(mode="validation")["properties"][field])


def to_openapi(node: Any) -> Any:
    """One JSON Schema 2020-12 node (recursively) as an OpenAPI 3.0 schema object."""
    if isinstance(node, list):
        return [to_openapi(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key == "$ref" and isinstance(value, str) and value.startswith(_REF_PREFIX):
            out[key] = _COMPONENTS + value[len(_REF_PREFIX) :]
        elif key == "const":
            out["enum"] = [value]
        elif key in ("properties", "$defs"):
            out[key] = {name: to_openapi(sub) for name, sub in value.items()}
        else:
            out[key] = to_openapi(value)
    variants = out.get("anyOf")
    if isinstance(variants, list) and {"type": "null"} in variants:
        rest = [v for v in variants if v != {"type": "null"}]
        del out["anyOf"]
        single = rest[0] if len(rest) == 1 else {"anyOf": rest}
        # OpenAPI 3.0 ignores siblings of a $ref: wrap it to say it may be null.
        single = {"allOf": [single]} if "$ref" in single else single
        out = {**single, **out, "nullable": True}
    if "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out = {"allOf": [{"$ref": ref}], **out}
    return out
