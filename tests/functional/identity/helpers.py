"""Shared helpers for the sign-in tests: users with a password and an authenticator, JSON calls."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyotp

from chalicelib.core import clock
from chalicelib.identity import users
from chalicelib.identity.mfa import totp as totp_factor
from chalicelib.identity.signin import password_hashing as passwords
from chalicelib.identity.signin import password_signin as signin

JSON_HEADERS = {"Content-Type": "application/json", "X-Requested-With": "test"}
PASSWORD = "correct horse battery staple"


@dataclass
class PasswordUser:
    user_id: str
    email: str
    password: str
    totp_secret: str | None
    recovery_codes: list[str]

    def totp_now(self, offset_steps: int = 0) -> str:
        assert self.totp_secret
        return pyotp.TOTP(self.totp_secret).at(clock.now() + offset_steps * 30)


def make_password_user(email: str = "pat@example.com", password: str = PASSWORD, *, totp: bool = True) -> PasswordUser:
    user = users.find_by_email(email) or users.create_user(email, email_verified=True)
    signin.set_password_hash(user.id, passwords.hash_password(password))
    secret, codes = None, []
    if totp:
        setup = totp_factor.start_setup(user.id, user.email)
        secret = setup["secret"]
        # confirm with the previous step's code so the current step stays unused for the test; the clock
        # is frozen so no 30-second boundary passes between computing the code and checking it
        with clock.frozen():
            codes = totp_factor.confirm_setup(user.id, pyotp.TOTP(secret).at(clock.now() - 30))
    return PasswordUser(user.id, user.email, password, secret, codes)


def post(client: Any, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    return client.http.post(path, headers={**JSON_HEADERS, **(headers or {})},
                            body=json.dumps(body) if not isinstance(body, (str, bytes)) else body)


def cookie_of(response: Any) -> str:
    """The ``aiplat_sid=...`` pair from a Set-Cookie header."""
    header = response.headers.get("Set-Cookie") or response.headers.get("set-cookie") or ""
    return header.split(";")[0]


def body(response: Any) -> Any:
    return json.loads(response.body) if response.body else None
