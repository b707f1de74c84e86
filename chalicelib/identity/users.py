"""The identity directory (global by design): e-mail, identity-provider subject, sign-in credentials.

E-mail uniqueness is kept by a claim item (``id`` = ``email#<address>``) written in the same
transaction as the user, so two sign-ups of one address cannot both succeed.
"""
from __future__ import annotations

from typing import Any

from pynamodb.exceptions import DoesNotExist, TransactWriteError
from pynamodb.transactions import TransactWrite

from chalicelib.core import clock
from chalicelib.core.http.errors import conflict
from chalicelib.core.ids import new_id
from chalicelib.core.store.tables import global_connection, global_model
from chalicelib.identity.models import EmailClaimAttrs, UserAttrs


def users() -> type[UserAttrs]:
    return global_model(UserAttrs)


def normalise_email(email: str) -> str:
    return email.strip().lower()


def get_user(user_id: str) -> UserAttrs | None:
    try:
        return users().get(user_id, consistent_read=True)
    except DoesNotExist:
        return None


def find_by_email(email: str) -> UserAttrs | None:
    try:
        claim = global_model(EmailClaimAttrs).get(f"email#{normalise_email(email)}", consistent_read=True)
    except DoesNotExist:
        return None
    return get_user(claim.user_id)


# read in place of a user when an address has no account, so both cases do the same reads; never issued
# (``new_id`` ids hold no lower-case word)
ABSENT_USER_ID = "usr_none"


def find_by_email_evenly(email: str) -> UserAttrs | None:
    """``find_by_email`` doing the same work whether or not the address has an account (the claim read,
    then one user read: of the claimed user, or of ``ABSENT_USER_ID``), for the public endpoints whose
    timing must not tell which addresses exist."""
    try:
        user_id = global_model(EmailClaimAttrs).get(f"email#{normalise_email(email)}", consistent_read=True).user_id
    except DoesNotExist:
        user_id = None
    user = get_user(user_id or ABSENT_USER_ID)
    return user if user_id else None


def create_user(email: str, *, email_verified: bool = False, display_name: str | None = None,
                user_id: str | None = None, **fields: Any) -> UserAttrs:
    """Create a user and claim its e-mail atomically; 409 when the address is taken. ``user_id``: an id
    already handed out for this person (a SCIM-provisioned user whose address arrives later)."""
    address = normalise_email(email)
    user = users()(user_id or new_id("usr"), email=address, email_verified=email_verified,
                   display_name=display_name, created_at=clock.iso(), **fields)
    claim = global_model(EmailClaimAttrs)(f"email#{address}", user_id=user.id)
    try:
        with TransactWrite(connection=global_connection()) as tx:
            tx.save(claim, condition=EmailClaimAttrs.id.does_not_exist())
            tx.save(user, condition=UserAttrs.id.does_not_exist())
    except TransactWriteError:
        raise conflict("email_taken", "An account with this e-mail address already exists.") from None
    return user
