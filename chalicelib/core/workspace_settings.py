"""A workspace's settings (the JSON ``settings`` of its directory entry): the one reader, and the names of
the settings other contexts read."""
from __future__ import annotations

import json
from typing import Any

from chalicelib.core.durations import parse_duration
from chalicelib.core.tenancy import RequestScope, WorkspaceAttrs

DOMAIN_JOIN = "domain_join"
CHAT_AUTO_EXPIRY = "chat_auto_expiry"  # ISO 8601 duration, or absent for "until deleted"
AGENT_RUN_AUTO_EXPIRY = "agent_run_auto_expiry"
AUTO_EXPIRY_SETTINGS = (CHAT_AUTO_EXPIRY, AGENT_RUN_AUTO_EXPIRY)
RATE_LIMITS = "rate_limits"  # {"per_token", "per_workspace"}: requests per minute, at most the plan's
ANSWER_LINK_HOSTS = "answer_link_hosts"  # hosts (or "*." + host) whose links answers keep
GROUNDING_CHECK_MODEL = "grounding_check_model"  # the model that checks answers' statements: an id, "off", or absent
ANSWER_MODE = "answer_mode"  # knowledge_only (absent) or knowledge_first: chats may allow general answers
ANSWER_MODES = ("knowledge_only", "knowledge_first")
# prompts and answers become span attributes (core/telemetry/tracing.py, which keeps the same name: it cannot
# import this module)
TRACE_CONTENT = "trace_content"
PLAIN_SETTINGS = (*AUTO_EXPIRY_SETTINGS, GROUNDING_CHECK_MODEL, TRACE_CONTENT, ANSWER_MODE)  # set as given (validated by the PATCH)


def settings_of(ws: WorkspaceAttrs) -> dict[str, Any]:
    """The settings object (empty when unset or unreadable)."""
    try:
        data = json.loads(ws.settings or "{}")
    except ValueError:
        data = {}
    return data if isinstance(data, dict) else {}


def auto_expiry_seconds(scope: RequestScope, setting: str) -> int | None:
    """Seconds of the scope's workspace's auto-expiry ``setting`` (one of ``AUTO_EXPIRY_SETTINGS``), or None."""
    value = settings_of(scope.entry()).get(setting)
    try:
        return parse_duration(value) if value else None
    except ValueError:
        return None


def answer_link_hosts(scope: RequestScope) -> tuple[str, ...]:
    """The hosts an Admin allowed answers to link to (validated when set; anything else is ignored)."""
    value = settings_of(scope.entry()).get(ANSWER_LINK_HOSTS)
    return tuple(h for h in value if isinstance(h, str)) if isinstance(value, list) else ()


def answer_mode(scope: RequestScope) -> str:
    """``knowledge_first`` when an Admin allowed general answers, else ``knowledge_only`` (the default)."""
    value = settings_of(scope.entry()).get(ANSWER_MODE)
    return value if value in ANSWER_MODES else ANSWER_MODES[0]
