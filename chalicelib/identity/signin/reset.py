"""Password reset by e-mailed link: valid 30 minutes, single use, only the token's SHA-256 is stored.

``request_reset`` answers nothing to its caller (the route always says 202): a known address with a
password or passkey account gets a link ``{auth_url}/reset?token=<token>``; an SSO-managed account
gets a message saying the password is managed at its identity provider; an unknown address gets
nothing. ``confirm_reset`` consumes the link with a conditional update (so a second use fails even when
concurrent), sets the new password, clears any lockout, signs out every session of the user and refuses every
token issued to the user before (grants, exchanged tokens and API tokens: ``tokens.bump_epoch``). The
second factor is not reset: the next password sign-in still asks for it.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import clock, mail
from chalicelib.core.config import settings
from chalicelib.core.http.errors import ApiError, validation_error
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import global_model
from chalicelib.core.tokens import bump_epoch
from chalicelib.identity import users as users_mod
from chalicelib.identity.models import RESET, ResetAttrs, state_key
from chalicelib.identity.opaque import digest, new_secret
from chalicelib.identity.signin import lockout, sessions
from chalicelib.identity.signin import password_hashing as passwords
from chalicelib.identity.signin import password_policy as password_rule
from chalicelib.identity.signin.password_signin import set_password_hash

LINK_TTL_SECONDS = 30 * 60
RESET_PATH = "/reset"


def _model() -> type[ResetAttrs]:
    return global_model(ResetAttrs)


def invalid_link() -> ApiError:
    return ApiError(400, "invalid_reset_token", "The reset link is invalid, has expired or was already used; "
                                                "ask for a new one.")


def request_reset(email: str, *, caller: Any = None) -> None:
    """Store a link and send one message, whoever the address belongs to (the same work every time, so
    the answer's timing does not tell whether an account exists)."""
    user = users_mod.find_by_email_evenly(email)
    token = new_secret()
    now = int(clock.now())
    known = user is not None and user.status == "active" and not user.idp
    _model()(state_key(RESET, digest(token)), user_id=user.id if known and user else "", created_at=now,
             link_expires_at=now + LINK_TTL_SECONDS, expires_at=now + 24 * 3600).save()
    if user is not None and user.status == "active" and user.idp:
        mail.send(user.email, "Your password is managed by your organisation",
                  f"Your account signs in through your organisation's identity provider ({user.idp}). "
                  "Reset your password there; this service does not hold it.", tag="reset-sso")
    elif known and user is not None:
        link = f"{settings().auth_url}{RESET_PATH}?token={quote(token)}"
        mail.send(user.email, "Reset your password",
                  f"Open this link to choose a new password:\n\n{link}\n\nIt is valid for {LINK_TTL_SECONDS // 60} "
                  "minutes and works once. If you did not ask for it, ignore this message.", tag="reset")
    else:
        mail.send(email, "Password reset requested",
                  "Someone asked to reset the password of an account with this address, but there is no such "
                  "account (or it is disabled). If it was not you, ignore this message.", tag="reset-unknown")


def confirm_reset(token: str, new_password: str, *, caller: Any = None) -> str:
    """Use the link once; returns the user id."""
    problem = password_rule.problem(new_password)
    if problem:
        raise validation_error([{"field": "new_password", "message": problem}])
    if not isinstance(token, str) or not 20 <= len(token) <= 128:
        raise invalid_link()
    cls = _model()
    pk = state_key(RESET, digest(token))
    try:
        item = cls.get(pk, consistent_read=True)
    except DoesNotExist:
        raise invalid_link() from None
    if not item.user_id:  # a request for an address without an account: never usable
        raise invalid_link()
    holder = users_mod.get_user(item.user_id)
    problem = password_rule.problem(new_password, email=holder.email if holder else None)
    if problem:  # checked before the link is used, so a refused password does not spend it
        raise validation_error([{"field": "new_password", "message": problem}])
    try:
        cls(pk).update(actions=[cls.used.set(True)],
                       condition=cls.used.does_not_exist() & (cls.link_expires_at > clock.now()))
    except UpdateError as err:
        if condition_failed(err):
            raise invalid_link() from None
        raise
    user = users_mod.get_user(item.user_id)
    if user is None or user.idp:
        raise invalid_link()
    set_password_hash(user.id, passwords.hash_password(new_password))
    lockout.unlock(user.id)
    sessions.revoke_all(user.id)
    bump_epoch(user.id)  # every token of the user issued before now: grants, exchanged and API tokens
    return user.id
