"""One error shape for every endpoint: `{"error": {"code": ..., "message": ...}}`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse

if TYPE_CHECKING:
    from streamtts.gateway.request_state import RequestState


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        return error_response(self.status, self.code, self.message, self.headers)


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


def request_failed(state: RequestState) -> ApiError:
    """409 for a request that failed, with its reason."""
    return ApiError(409, "request_failed", f"request {state.request_id} failed: {state.error or 'unknown'}")


AUDIT_SCOPE_KEY = "streamtts.audit"
"""Where a call's audit context (gateway.audit_trail.AuditContext) sits in the ASGI scope."""


async def api_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    ctx = request.scope.get(AUDIT_SCOPE_KEY)
    if ctx is not None:  # the refusal's reason is the audit event's outcome
        ctx.outcome = exc.code
    return exc.response()


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    # Starlette's own 404/405 in our JSON shape.
    status = int(getattr(exc, "status_code", 500))
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
    return error_response(status, code, str(getattr(exc, "detail", "error")), getattr(exc, "headers", None))
