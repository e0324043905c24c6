"""Request helpers shared by the HTTP routes: the app's Gateway, auth, bounded JSON bodies."""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError
from starlette.requests import HTTPConnection, Request

from streamtts.gateway.audit_trail import audit_context
from streamtts.gateway.errors import ApiError
from streamtts.gateway.service import Gateway

M = TypeVar("M", bound=BaseModel)


def gateway(conn: HTTPConnection) -> Gateway:
    gw: Gateway = conn.app.state.gateway
    return gw


def authenticate(conn: HTTPConnection, *, allow_query: bool = False) -> str:
    """The caller's tenant (401 bad/missing/expired key, 403 `denied_address`); who it is
    goes into the call's audit context, refused or not."""
    gw = gateway(conn)
    ctx = audit_context(conn)
    try:
        key = gw.keys.lookup(conn.headers, conn.query_params if allow_query else None)
        ctx.tenant, ctx.key_id = key.tenant, key.key_id
        gw.keys.check(key, ctx.address)
    except ApiError as err:
        gw.metrics.rejected.labels(err.code).inc()
        raise
    return key.tenant


async def read_body(request: Request, model: type[M]) -> M:
    """Parse a JSON body into `model`, refusing bodies over the limit (413) while reading,
    so a chunked upload without Content-Length cannot exhaust memory either."""
    gw = gateway(request)
    limit = gw.settings.max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(gw, limit)
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            raise _too_large(gw, limit)
    try:
        obj: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ApiError(400, "invalid_json", "the body must be a JSON object") from None
    if not isinstance(obj, dict):
        raise ApiError(400, "invalid_json", "the body must be a JSON object")
    try:
        return model.model_validate(obj)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        raise ApiError(400, "invalid_request", f"{where}: {first.get('msg', 'invalid')}") from None


def _too_large(gw: Gateway, limit: int) -> ApiError:
    gw.metrics.rejected.labels("body_too_large").inc()
    return ApiError(413, "body_too_large", f"request body over {limit} bytes")
