"""Other people inside an export: a data subject's export holds the subject's personal values only.

Audit events name the acting Admin (e-mail, IP address, user agent) or a target; invitations name who
sent them. In an export about ``subject`` every other person appears under the stable pseudonym of
``core.audit.pseudonym`` (derived from the opaque id, as for an erased actor), their IP address and user
agent are blank, and an e-mail address in an event's details that is not the subject's is replaced.
"""
from __future__ import annotations

import json
import re
from typing import Any

from chalicelib.core import audit

OTHER_ADDRESS = "(another person's address)"
_ADDRESS = re.compile(r"[^@\s\"']+@[^@\s\"']+\.[^@\s\"']+")


def _other(person: dict[str, Any]) -> dict[str, Any]:
    out = {"type": person.get("type", "")}
    if person.get("id"):
        out["pseudonym"] = audit.pseudonym(str(person["id"]))
    return out


def _scrub(value: Any, email: str) -> Any:
    if isinstance(value, str):
        return _ADDRESS.sub(lambda m: m.group(0) if m.group(0).lower() == email else OTHER_ADDRESS, value)
    if isinstance(value, dict):
        return {k: _scrub(v, email) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, email) for v in value]
    return value


def audit_event(event: dict[str, Any], subject: str, email: str) -> dict[str, Any]:
    """``event`` as the subject's export shows it (``email``: the subject's lower-cased address)."""
    out = {k: v for k, v in event.items() if k != "personal"}  # commitments to other people's values
    actor = dict(out.get("actor") or {})
    if actor.get("id") != subject and actor.get("type") != "system":
        out["actor"] = _other(actor)
        out["ip"] = out["user_agent"] = ""
    target = dict(out.get("target") or {})
    if target.get("type") in ("user", "member") and target.get("id") != subject:
        out["target"] = _other(target)
    elif target.get("id") != subject:
        target.pop("email", None)
        out["target"] = target
    out["details"] = _scrub(out.get("details"), email)
    return out


def invitation(item: dict[str, Any], subject: str) -> dict[str, Any]:
    """An invitation addressed to the subject: who sent it is a pseudonym unless it was the subject."""
    out = dict(item)
    try:
        by = json.loads(out.get("invited_by") or "{}")
    except ValueError:
        by = {}
    if isinstance(by, dict) and by.get("id") != subject:
        out["invited_by"] = json.dumps(_other({"type": "user", **by}), sort_keys=True)
    return out
