"""Password reset requests for any well-formed address, the longest included."""
from __future__ import annotations

from typing import Any

from chalice.test import Client

from chalicelib.groups import create_app
from chalicelib.identity import users
from tests.functional.identity.helpers import body, post


def test_a_254_character_address_gets_its_reset_link(outbox: Any) -> None:
    """The longest address RFC 5321 allows (254 characters, 63-character labels) is accepted and its
    message is delivered (the local outbox file name stays within the 255 bytes a file name may have)."""
    address = "00@" + ".".join(["a" * 63] * 3) + "." + "b" * 59
    assert len(address) == 254
    users.create_user(address, email_verified=True)
    with Client(create_app("identity")) as c:
        r = post(c, "/signin/reset", {"email": address})
        assert r.status_code == 202, r.body
        assert body(r)["status"] == "accepted"
    assert [m["tag"] for m in outbox.messages(address)] == ["reset"]
