"""RFC 9457 problem details: the one error shape every route returns."""
from __future__ import annotations

from typing import Any

PROBLEM_CONTENT_TYPE = "application/problem+json"

_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    421: "Misdirected Request",
    423: "Locked",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class ApiError(Exception):
    """An error meant for the caller: status, stable snake_case ``code`` and a clear ``detail``."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        errors: list[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.errors = errors
        self.headers = headers or {}
        self.extra = extra or {}

    def to_problem(self, correlation_id: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": f"https://errors.aiplatform.dev/{self.code.replace('_', '-')}",
            "title": _TITLES.get(self.status, "Error"),
            "status": self.status,
            "detail": self.detail,
            "code": self.code,
            "correlation_id": correlation_id,
        }
        if self.errors:
            body["errors"] = self.errors
        body.update(self.extra)
        return body


def not_found(what: str = "resource") -> ApiError:
    return ApiError(404, "not_found", f"The {what} does not exist or is not visible to this token.")


def unauthorized(detail: str = "A valid Bearer access token is required.") -> ApiError:
    return ApiError(
        401, "invalid_token", detail, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}
    )


def forbidden(detail: str = "Your role in this workspace does not allow this action.") -> ApiError:
    return ApiError(403, "forbidden", detail)


def validation_error(errors: list[dict[str, str]]) -> ApiError:
    fields = ", ".join(e["field"] for e in errors)
    return ApiError(400, "validation_failed", f"The request has invalid fields: {fields}.", errors=errors)


def conflict(code: str, detail: str) -> ApiError:
    return ApiError(409, code, detail)
