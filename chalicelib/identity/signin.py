"""INTERIM (signin-web): the MFA hand-over interface of signin-core (pending sign-in after a
password), minimal, so the security-key second factor can be built first. signin-core's replaces it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chalicelib.identity import flows, sessions

MFA_TTL = 300


@dataclass(frozen=True)
class Pending:
    user_id: str
    amr: list[str]
    token: str


def start_pending(user_id: str, amr: list[str]) -> str:
    return flows.put("mfa", {"user_id": user_id, "amr": amr}, MFA_TTL)


def pending_from_mfa_token(token: str) -> Pending | None:
    data = flows.peek("mfa", token) if token else None
    return Pending(data["user_id"], data["amr"], token) if data else None


def complete(pending: Pending, extra_amr: list[str], *, caller: Any = None) -> tuple[str, sessions.SessionAttrs]:
    if flows.take("mfa", pending.token) is None:
        raise ValueError("pending sign-in already completed")
    amr = sorted(set(pending.amr) | set(extra_amr) | {"mfa"})
    return sessions.create_session(pending.user_id, amr, caller=caller)
