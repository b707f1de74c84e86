"""A workspace's optional monthly token budget (Admin setting), spent by every model answer.

The budget (``monthly_tokens``, input plus output tokens per calendar month, UTC) is kept on the workspace's
``model_access`` item beside the allow-list and the connections; none is set by default. Every answer of a
generative model routed for the workspace (chats, ``/v1/chat/completions``, agent steps) adds its tokens
to one counter per workspace and month in the global ``usage_counters`` table (key ``month#YYYY-MM``;
the daily per-model counters of ``GET /v1/usage`` are apart and unchanged). The built-in extractive
provider costs nothing and counts nothing.

When the month's tokens reach the budget, routing a model for the workspace (``routing.choose``: every
chat, completion and agent run the worker starts) and starting an agent run answer ``429 token_budget_exhausted`` with
``Retry-After`` (seconds to the next month, UTC) and the ``RateLimit-Policy``/``RateLimit`` fields of
draft-ietf-httpapi-ratelimit-headers (policy ``"monthly-tokens"``, quota unit ``"tokens"``). The check
happens before each model call; answers already running when the budget is reached finish and count, so
a month may end a little above its budget.
"""
from __future__ import annotations

import calendar
import datetime as dt
from typing import Any

from chalicelib.core import audit, aws, clock
from chalicelib.core.audit import Actor, CallerLike
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError, validation_error
from chalicelib.core.tenancy import RequestScope
from chalicelib.llm.access import changed, settings_item
from chalicelib.llm.models import ModelAccessAttrs, model_access

POLICY = "monthly-tokens"
MAX_BUDGET = 10**12
_TABLE = "usage_counters"


def _month(now: dt.datetime | None = None) -> tuple[str, int, int]:
    """This month's counter key, the month's length and the seconds left in it (UTC)."""
    now = now or clock.utcnow()
    days = calendar.monthrange(now.year, now.month)[1]
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (start + dt.timedelta(days=days))
    return f"month#{now:%Y-%m}", days * 86400, max(1, int((following - now).total_seconds()))


def budget_of(item: ModelAccessAttrs | None) -> int | None:
    value = getattr(item, "monthly_token_budget", None) if item is not None else None
    return int(value) if value is not None else None


def used(workspace_id: str) -> int:
    """Tokens the workspace's model answers spent this month."""
    key, _, _ = _month()
    got = aws.client("dynamodb", settings().global_region).get_item(
        TableName=aws.table_name(_TABLE), Key={"workspace_id": {"S": workspace_id}, "key": {"S": key}},
        ConsistentRead=True).get("Item") or {}
    return int(got.get("tokens", {}).get("N", "0"))


def count(workspace_id: str, tokens: int) -> None:
    """Add an answer's tokens to the month's counter."""
    if tokens <= 0:
        return
    key, _, _ = _month()
    aws.client("dynamodb", settings().global_region).update_item(
        TableName=aws.table_name(_TABLE), Key={"workspace_id": {"S": workspace_id}, "key": {"S": key}},
        UpdateExpression="ADD tokens :t", ExpressionAttributeValues={":t": {"N": str(int(tokens))}})


def headers(budget: int, spent: int) -> dict[str, str]:
    """``Retry-After`` and the draft-ietf-httpapi-ratelimit-headers fields for the month's budget."""
    _, window, left = _month()
    return {"Retry-After": str(left),
            "RateLimit-Policy": f'"{POLICY}";q={budget};qu="tokens";w={window}',
            "RateLimit": f'"{POLICY}";r={max(0, budget - spent)};t={left}'}


def check(workspace_id: str, item: ModelAccessAttrs | None) -> None:
    """429 ``token_budget_exhausted`` when the workspace's budget (``item``: its model settings) is spent."""
    budget = budget_of(item)
    if budget is None:
        return
    spent = used(workspace_id)
    if spent >= budget:
        raise ApiError(429, "token_budget_exhausted",
                       f"This workspace's monthly token budget ({budget} tokens) is spent; it renews on the first "
                       "of next month (UTC). An Admin may raise it (PUT /v1/models/budget).",
                       headers=headers(budget, spent))


def check_workspace(scope: RequestScope) -> None:
    check(scope.workspace_id, settings_item(scope))


def describe(workspace_id: str, budget: int | None) -> dict[str, Any]:
    key, _, left = _month()
    spent = used(workspace_id)
    return {"monthly_tokens": budget, "month": key.split("#", 1)[1], "used_tokens": spent,
            "remaining_tokens": None if budget is None else max(0, budget - spent),
            "resets_at": clock.iso(clock.now() + left)}


def get(scope: RequestScope) -> dict[str, Any]:
    """``GET /v1/models/budget``."""
    return describe(scope.workspace_id, budget_of(settings_item(scope)))


def put(scope: RequestScope, body: Any, caller: CallerLike | None = None) -> dict[str, Any]:
    """``PUT /v1/models/budget``: ``{"monthly_tokens": N}`` sets it, ``null`` removes it."""
    value = body.get("monthly_tokens", ...) if isinstance(body, dict) else ...
    if not isinstance(body, dict) or set(body) != {"monthly_tokens"} or not (
            value is None or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_BUDGET)):
        raise validation_error([{"field": "monthly_tokens",
                                 "message": f"must be an integer from 1 to {MAX_BUDGET}, or null (no budget)"}])
    principal, region = scope.principal, scope.home
    cls = model_access(region)
    action = cls.monthly_token_budget.set(value) if value is not None else cls.monthly_token_budget.remove()
    cls(principal.workspace_id).update(actions=[action, cls.updated_at.set(clock.iso()),
                                                cls.updated_by.set(principal.user_id)])
    changed(principal.workspace_id)
    audit.append(region, principal.workspace_id, "models.budget_updated", actor=Actor.of(principal),
                 target={"type": "workspace", "id": principal.workspace_id},
                 details={"monthly_tokens": value}, caller=caller)
    return describe(principal.workspace_id, value)
