"""Retention sweeps for expired invitations (regional) and e-mail sign-in codes (global). Each returns
counts only. Agent memory and runs are swept in ``chalicelib/agents/runtime/reaper.py``, chats in
``chalicelib/chat/expiry.py`` and backups in ``chalicelib/residency/backups.py``; audit events are never swept.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core import clock
from chalicelib.core.logs import get_logger
from chalicelib.core.regions import served_regions
from chalicelib.core.store.tables import global_model
from chalicelib.identity.signin.email_codes import EmailCodeAttrs
from chalicelib.platform.models import invitations

log = get_logger("residency.retention")
EMAIL_CODE_PREFIX = "ecode#"


def sweep_invitations(event: dict[str, Any] | None = None) -> dict[str, int]:
    """Delete pending invitations past ``expires_at`` and address claims past theirs (accepted and revoked
    invitations stay: they are the workspace's record of who joined)."""
    now = int(clock.now())
    out: dict[str, int] = {}
    for region in served_regions():
        cls = invitations(region)
        n = 0
        for item in cls.scan(filter_condition=cls.expires_at <= now):
            if item.id.startswith("inv_") and item.status != "pending":
                continue
            try:
                cond = cls.expires_at <= now
                if item.id.startswith("inv_"):
                    cond = cond & (cls.status == "pending")
                cls(item.workspace_id, item.id).delete(condition=cond)
                n += 1
            except Exception:  # noqa: BLE001 - accepted, revoked or extended meanwhile: keep it
                continue
        out[region] = n
    if any(out.values()):
        log.info("expired invitations deleted", extra={"deleted": out})
    return out


def sweep_email_codes(event: dict[str, Any] | None = None) -> dict[str, int]:
    """Delete e-mail code records (``ecode#...``) whose item expiry has passed; the emulator's TTL never does."""
    now = int(clock.now())
    cls = global_model(EmailCodeAttrs)
    n = 0
    for item in cls.scan(filter_condition=cls.pk.startswith(EMAIL_CODE_PREFIX) & (cls.expires_at <= now)):
        try:
            cls(item.pk).delete(condition=cls.expires_at <= now)
            n += 1
        except Exception:  # noqa: BLE001 - a new code was sent meanwhile: keep it
            continue
    if n:
        log.info("expired e-mail codes deleted", extra={"deleted": n})
    return {"email_codes": n}
