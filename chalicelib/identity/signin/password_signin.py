"""Password sign-in, the MFA step and the shared ending of every sign-in (``complete``).

Flow: ``password_signin`` checks e-mail + password (with the lockout reservation, see ``lockout``) and
answers a short-lived single-use ``mfa_token`` (a pending sign-in with ``amr=["pwd"]``); the browser
then proves a second factor: a TOTP or recovery code (``mfa_step``) or a WebAuthn
security key, which calls ``pending_from_mfa_token`` and ``complete``. ``complete`` consumes the token
once, clears the failure counter and creates the session.

Every refusal before the second factor is the same 401 ``invalid_credentials`` (unknown e-mail, wrong
password, locked account, SSO-managed account): the unauthenticated caller learns nothing; each costs
one argon2id verification (``passwords.burn`` when there is no real hash to check).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import clock, mail
from chalicelib.core.authz import mfa_used
from chalicelib.core.http.errors import ApiError
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import global_model
from chalicelib.identity import users as users_mod
from chalicelib.identity.mfa import factors as mfa
from chalicelib.identity.models import PENDING_MFA, PendingAttrs, SessionAttrs, state_key
from chalicelib.identity.opaque import digest, new_secret
from chalicelib.identity.signin import lockout, mfa_gate, sessions
from chalicelib.identity.signin import password_hashing as passwords

MFA_TOKEN_TTL_SECONDS = 5 * 60
MFA_TOKEN_MAX_ATTEMPTS = 5


@dataclass(frozen=True)
class Pending:
    """A sign-in waiting for its second factor."""

    user_id: str
    amr: list[str]
    return_to: str
    token_hash: str


def _pending_model() -> type[PendingAttrs]:
    return global_model(PendingAttrs)


def invalid_credentials() -> ApiError:
    return ApiError(401, "invalid_credentials", "The e-mail address or the password is not correct.")


def new_pending(user_id: str, amr: list[str], return_to: str) -> str:
    """Store a pending sign-in; returns its mfa_token (only the digest is kept)."""
    token = new_secret("mfa_")
    _pending_model()(state_key(PENDING_MFA, digest(token)), user_id=user_id, amr_json=json.dumps(amr), return_to=return_to,
                     attempts=0, expires_at=int(clock.now()) + MFA_TOKEN_TTL_SECONDS).save()
    return token


def pending_from_mfa_token(token: str) -> Pending | None:
    """The live, unconsumed pending sign-in of ``token``, or None."""
    if not isinstance(token, str) or not token.startswith("mfa_") or len(token) > 128:
        return None
    try:
        item = _pending_model().get(state_key(PENDING_MFA, digest(token)), consistent_read=True)
    except DoesNotExist:
        return None
    if item.consumed or item.expires_at <= clock.now() or item.attempts >= MFA_TOKEN_MAX_ATTEMPTS:
        return None
    return Pending(item.user_id, list(json.loads(item.amr_json)), item.return_to, item.pk)


def complete(pending: Pending, extra_amr: list[str], *, caller: Any) -> tuple[str, SessionAttrs]:
    """Consume the pending sign-in (once) and create the session; 401 when already used or expired.

    ``amr`` = the pending methods + ``extra_amr`` + ``mfa`` when a second factor was added.
    """
    cls = _pending_model()
    try:
        cls(pending.token_hash).update(
            actions=[cls.consumed.set(True)],
            condition=cls.consumed.does_not_exist() & (cls.expires_at > int(clock.now())) & cls.pk.exists())
    except UpdateError as err:
        if condition_failed(err):
            raise ApiError(401, "invalid_mfa_token", "The sign-in has expired or was already completed; start again.") from None
        raise
    amr = set(pending.amr) | set(extra_amr)
    if extra_amr:
        amr.add("mfa")
    lockout.clear(pending.user_id)
    return sessions.create_session(pending.user_id, sorted(amr), caller=caller)


DECOY_LOCK = "decoy"


def _decoy_attempt() -> None:
    """The lockout writes of a real attempt, on a key no user has, so an unknown address costs the same."""
    reservation = lockout.reserve(DECOY_LOCK)
    if reservation is not None:
        lockout.release(reservation)


def password_signin(email: str, password: str, return_to: str, *, caller: Any) -> dict[str, Any]:
    """Check e-mail + password; the second-factor challenge, or the uniform 401."""
    user = users_mod.find_by_email(email)
    if user is None or not user.password_hash or user.idp or user.status != "active":
        _decoy_attempt()
        passwords.burn(password)
        raise invalid_credentials()
    reservation = lockout.reserve(user.id)
    if reservation is None:  # locked: evaluate nothing, answer like a wrong password
        passwords.burn(password)
        raise invalid_credentials()
    if not passwords.verify_password(user.password_hash, password):
        lockout.failed(reservation, caller=caller)
        raise invalid_credentials()
    lockout.release(reservation)
    if passwords.needs_rehash(user.password_hash):
        set_password_hash(user.id, passwords.hash_password(password))
    methods = mfa.methods(user.id)
    if not methods:
        # The password was right but there is no second factor (e.g. after an Admin MFA reset). Answer
        # exactly as for a wrong password, so a guessed password is never confirmed; only the mailbox
        # owner learns what to do next.
        mail.send(user.email, "Set up a second factor to sign in with your password",
                  "Someone (hopefully you) entered your password, but your account has no second factor, so "
                  "the password alone does not sign in. Sign in with an e-mailed code instead and set up an "
                  "authenticator app or a security key. If this was not you, change your password.",
                  tag="mfa-setup")
        raise invalid_credentials()
    return {"mfa_required": True, "mfa_token": new_pending(user.id, ["pwd"], return_to), "methods": methods,
            "expires_in": MFA_TOKEN_TTL_SECONDS}


def mfa_step(token: str, code: str, *, caller: Any) -> tuple[Pending, str, SessionAttrs]:
    """Answer the challenge with a TOTP or recovery code; returns the pending sign-in, sid and session."""
    pending = pending_from_mfa_token(token)
    if pending is None:
        raise ApiError(401, "invalid_mfa_token", "The sign-in has expired or was already completed; start again.")
    cls = _pending_model()
    try:  # count the attempt on the token first: five wrong codes burn it
        cls(pending.token_hash).update(actions=[cls.attempts.set(cls.attempts + 1)],
                                       condition=cls.attempts < MFA_TOKEN_MAX_ATTEMPTS)
    except UpdateError as err:
        if condition_failed(err):
            raise ApiError(401, "invalid_mfa_token", "Too many wrong codes; start again.") from None
        raise
    reservation = lockout.reserve(pending.user_id)
    if reservation is None:
        raise ApiError(401, "invalid_code", "The code is not correct.")
    try:
        extra = mfa.verify_code(pending.user_id, code)
    except mfa.CodeAlreadyUsed:
        lockout.release(reservation)  # the code was right, only spent: not a guess, so no lockout strike
        raise ApiError(401, "code_already_used", "This code was already used. Wait for the next code in your "
                                                 "authenticator app (a new one appears every 30 seconds).") from None
    if extra is None:
        lockout.failed(reservation, caller=caller)
        raise ApiError(401, "invalid_code", "The code is not correct.")
    lockout.release(reservation)
    sid, record = complete(pending, extra, caller=caller)
    return pending, sid, record


def set_password_hash(user_id: str, password_hash: str) -> None:
    users_mod.users()(user_id).update(actions=[users_mod.UserAttrs.password_hash.set(password_hash)])


def after_first_factor(user_id: str, amr: list[str], return_to: str, *, caller: Any, respond: Any) -> Any:
    """After a first factor that is not a password (e-mailed code): users who set up a second factor
    must use it (``mfa_required`` challenge); others are signed in at once (``respond``), and sent to the
    explanation page (``mfa_gate``) when the workspace they are heading for requires MFA."""
    methods = mfa.methods(user_id)
    if methods:
        return {"mfa_required": True, "mfa_token": new_pending(user_id, amr, return_to), "methods": methods,
                "expires_in": MFA_TOKEN_TTL_SECONDS}
    lockout.clear(user_id)
    sid, record = sessions.create_session(user_id, amr, caller=caller)
    gated = None if mfa_used(amr) else mfa_gate.workspace_needing_mfa(user_id, return_to)
    return respond(mfa_gate.page_url(return_to, gated) if gated else return_to, sid, record)
