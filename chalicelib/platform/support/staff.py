"""Registering provider support staff: the operator actions behind ``support_cli`` (no API route).

Each change is written to the ``support_staff`` table (``platform/models.py``) and appended to the
operators' audit chain: a hash chain like a workspace's (``core/audit.py``), in the global region's
audit table under ``OPERATOR_CHAIN``, so it is covered by the same change-stream tamper check. The
actor is the AWS principal that ran the command (STS ``GetCallerIdentity``) and the operator's name
given with ``--by``. Removing someone ends their support access at once: every support request checks
``support.is_staff`` first, whatever grants they hold.
"""
from __future__ import annotations

from typing import Any

from pynamodb.exceptions import DoesNotExist

from chalicelib.core import audit, aws, clock
from chalicelib.core.config import settings
from chalicelib.identity import users
from chalicelib.platform.models import support_staff
from chalicelib.platform.support import service as support

OPERATOR_CHAIN = "operators"  # never a workspace id (those start with "ws_")


class StaffError(ValueError):
    """An operator request that cannot be done (unknown user, not registered)."""


def operator(by: str) -> audit.Actor:
    """Who is acting: the AWS principal's ARN and the operator's own name or e-mail."""
    if not by.strip():
        raise StaffError("say who you are with --by (your name or e-mail)")
    arn = aws.client("sts", settings().global_region).get_caller_identity()["Arn"]
    return audit.Actor("operator", arn, by.strip()[:254])


def _view(item: Any) -> dict[str, Any]:
    return {"user_id": item.user_id, "email": item.email, "name": item.name, "location": item.location,
            "active": bool(item.active), "added_at": item.added_at}


def _log(action: str, actor: audit.Actor, user_id: str, details: dict[str, Any]) -> None:
    audit.append(settings().global_region, OPERATOR_CHAIN, action, actor=actor,
                 target={"type": "user", "id": user_id}, details=details)


def add(email: str, name: str, location: str, *, actor: audit.Actor) -> dict[str, Any]:
    """Register (or re-activate) the directory user with ``email`` as support staff."""
    user = users.find_by_email(email)
    if user is None:
        raise StaffError(f"no user with the e-mail {email!r}: they sign in once (e-mailed code) to be in the directory")
    if not name.strip():
        raise StaffError("give the person's name with --name")
    support.register_staff(user.id, name.strip()[:200], location.strip()[:100])
    _log("support.staff_added", actor, user.id, {"email": user.email, "name": name.strip()[:200],
                                                 "location": location.strip()[:100]})
    return _view(support_staff().get(user.id, consistent_read=True))


def remove(email: str, *, actor: audit.Actor) -> dict[str, Any]:
    """Take support access away (the record stays, inactive, for the history)."""
    user = users.find_by_email(email)
    try:
        item = support_staff().get(user.id, consistent_read=True) if user else None
    except DoesNotExist:
        item = None
    if item is None or not item.active:
        raise StaffError(f"{email!r} is not registered support staff")
    item.update(actions=[support_staff().active.set(False)])
    _log("support.staff_removed", actor, item.user_id, {"email": item.email})
    return _view(support_staff().get(item.user_id, consistent_read=True))


def list_staff(include_removed: bool = False) -> list[dict[str, Any]]:
    items = [_view(i) for i in support_staff().scan(consistent_read=True)]
    return sorted((i for i in items if include_removed or i["active"]), key=lambda i: (i["email"], i["user_id"]))


def history() -> dict[str, Any]:
    """The operators' chain, verified: ``{ok, problems, events}``."""
    region = settings().global_region
    events = list(audit.iter_chain(region, OPERATOR_CHAIN))
    result = audit.verify_chain(events)
    return {"ok": result.ok, "problems": list(result.problems), "count": result.count, "events": events,
            "at": clock.iso()}
