"""Request limits of every authenticated API: per token and per workspace, per minute, by plan.

One fixed one-minute window per workspace is one item of the regional ``request_counters`` table (in the
workspace's own region): ``n`` counts the workspace's requests and ``t_<token>`` each token's (a keyed
digest of the token id, never the id). A request is one conditional ``UpdateItem`` that raises both counts
only while both are under their quota, so the limits are exact under any concurrency and a refused request
does no work. Items expire (TTL) after their window.

Quotas come from the workspace's plan (``PLANS``); an Admin may lower them, never raise them past the
plan's, with the ``rate_limits`` setting (``core.workspace_settings.RATE_LIMITS``). Answers carry the
``RateLimit-Policy`` and ``RateLimit`` fields of the IETF draft (draft-ietf-httpapi-ratelimit-headers), and a
429 ``rate_limited`` adds ``Retry-After``. ``API_RATE_LIMIT_FACTOR`` (settings, default 1) multiplies every
quota: a test stack under a fuzzer raises it instead of turning the limits off.
"""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import clock
from chalicelib.core.aws import client, table_name
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError
from chalicelib.core.tenancy import RequestScope
from chalicelib.core.workspace_settings import RATE_LIMITS, settings_of

WINDOW_SECONDS = 60
TABLE = "request_counters"


@dataclass(frozen=True)
class Quotas:
    """Requests per window: for each token, and for the whole workspace."""

    per_token: int
    per_workspace: int


PLANS: dict[str, Quotas] = {  # the plan's quotas are also the ceiling of what an Admin may set
    "free": Quotas(per_token=600, per_workspace=1_200),
    "team": Quotas(per_token=1_200, per_workspace=6_000),
    "enterprise": Quotas(per_token=3_000, per_workspace=30_000),
}
SETTING_FIELDS = ("per_token", "per_workspace")


def plan_quotas(plan: str | None) -> Quotas:
    return PLANS.get(plan or "free", PLANS["free"])


def quotas(scope: RequestScope) -> Quotas:
    """The workspace's quotas: its plan's, lowered by its ``rate_limits`` setting where set."""
    ws = scope.workspace
    ceiling = plan_quotas(ws.billing_plan if ws is not None else None)
    chosen = settings_of(ws).get(RATE_LIMITS) if ws is not None else None
    chosen = chosen if isinstance(chosen, dict) else {}

    def pick(name: str) -> int:
        value = chosen.get(name)
        limit = int(getattr(ceiling, name))
        return min(value, limit) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else limit

    return Quotas(per_token=pick("per_token"), per_workspace=pick("per_workspace"))


def _token_attr(token_id: str) -> str:
    """The token's counter attribute: a keyed digest, so the table never holds a token id."""
    mac = hmac.new(b"request-counter", token_id.encode(), hashlib.sha256).hexdigest()[:20]
    return "t_" + mac


def _policy_header(q: Quotas, factor: int) -> str:
    return (f'"token";q={q.per_token * factor};w={WINDOW_SECONDS}, '
            f'"workspace";q={q.per_workspace * factor};w={WINDOW_SECONDS}')


def charge(scope: RequestScope) -> dict[str, str]:
    """Count one request of ``scope``'s token in its workspace; the headers to send with the answer, or a
    429 ``rate_limited`` (``Retry-After``) when either quota of the current window is spent. A token without
    a workspace (creating one) is not counted here."""
    principal = scope.principal
    if not principal.workspace_id or scope.region is None:
        return {}
    q, factor = quotas(scope), settings().api_rate_limit_factor
    now = clock.now()
    window = int(now // WINDOW_SECONDS) * WINDOW_SECONDS
    reset = max(1, int(window + WINDOW_SECONDS - now))
    token_limit, ws_limit = q.per_token * factor, q.per_workspace * factor
    policy = _policy_header(q, factor)
    try:
        out = client("dynamodb", scope.region).update_item(
            TableName=table_name(TABLE), Key={"key": {"S": f"{principal.workspace_id}#{window}"}},
            UpdateExpression="SET #n = if_not_exists(#n, :zero) + :one, #t = if_not_exists(#t, :zero) + :one, "
                             "expires_at = :expires",
            ConditionExpression="(attribute_not_exists(#n) OR #n < :ws) AND (attribute_not_exists(#t) OR #t < :tok)",
            ExpressionAttributeNames={"#n": "n", "#t": _token_attr(principal.token_id)},
            ExpressionAttributeValues={":zero": {"N": "0"}, ":one": {"N": "1"}, ":ws": {"N": str(ws_limit)},
                                       ":tok": {"N": str(token_limit)},
                                       ":expires": {"N": str(window + WINDOW_SECONDS + 60)}},
            ReturnValues="UPDATED_NEW")
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise
        raise ApiError(429, "rate_limited", "Too many requests for this token or workspace; retry after "
                                            f"{reset} s.",
                       headers={"Retry-After": str(reset), "RateLimit-Policy": policy,
                                "RateLimit": f'"token";r=0;t={reset}'}) from None
    counts: dict[str, Any] = out.get("Attributes", {})
    token_left = token_limit - int(counts.get(_token_attr(principal.token_id), {}).get("N", token_limit))
    ws_left = ws_limit - int(counts.get("n", {}).get("N", ws_limit))
    name, left = ("token", token_left) if token_left <= ws_left else ("workspace", ws_left)
    return {"RateLimit-Policy": policy, "RateLimit": f'"{name}";r={max(0, left)};t={reset}'}
