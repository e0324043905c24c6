"""Export the contracts as JSON Schema files so non-Python producers can validate too.

`python -m streamtts.schemas.jsonschema_export` rewrites `schemas/jsonschema/*.json` (each contract's
value, `<name>.v1.json`, and its record headers, `<name>.headers.v1.json`); a test fails when the
checked-in files drift from the Python definitions.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

from streamtts.schemas import CONTRACTS, SCHEMA_VERSION
from streamtts.schemas.wire import headers_schema

SCHEMA_DIR = Path(__file__).resolve().parent / "jsonschema"


def schema_for(name: str) -> dict[str, Any]:
    model = CONTRACTS[name]
    schema = model.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://streamtts.dev/schemas/v{SCHEMA_VERSION}/{name}.json"
    return schema


def render(name: str) -> bytes:
    return orjson.dumps(schema_for(name), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def render_headers(name: str) -> bytes:
    """The JSON Schema of a contract's record headers (`<name>.headers.v1.json`)."""
    schema = headers_schema(CONTRACTS[name])
    return orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def main() -> int:
    SCHEMA_DIR.mkdir(exist_ok=True)
    for name in CONTRACTS:
        path = SCHEMA_DIR / f"{name}.v{SCHEMA_VERSION}.json"
        path.write_bytes(render(name))
        print(f"wrote {path.relative_to(SCHEMA_DIR.parent.parent)}", file=sys.stderr)
        headers = SCHEMA_DIR / f"{name}.headers.v{SCHEMA_VERSION}.json"
        headers.write_bytes(render_headers(name))
        print(f"wrote {headers.relative_to(SCHEMA_DIR.parent.parent)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
