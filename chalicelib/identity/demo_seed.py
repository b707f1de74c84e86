"""Demo sign-in material for ``make run`` (called by the local runner's seed; never by a Lambda).

``seed_signin_demo`` gives the demo user a generated password and an authenticator (TOTP) secret, and
creates an API token for the demo workspace (the seed registers the web app's OAuth client itself). Everything is generated at run time (no secret in the repository).
"""
from __future__ import annotations

import secrets
from typing import Any

import pyotp

from chalicelib.core import clock
from chalicelib.identity.account import api_tokens
from chalicelib.identity.mfa import totp
from chalicelib.identity.signin import password_hashing as passwords
from chalicelib.identity.signin import password_signin as signin


def seed_signin_demo(user_id: str, email: str, workspace_id: str) -> dict[str, Any]:
    password = "demo-" + secrets.token_urlsafe(12)
    signin.set_password_hash(user_id, passwords.hash_password(password))
    secret = ""
    if not totp.has_totp(user_id):
        secret = totp.start_setup(user_id, email)["secret"]
        totp.confirm_setup(user_id, pyotp.TOTP(secret).at(clock.now() - 30))  # keep the current step usable

    token, record = api_tokens.create(user_id, ["pwd", "otp", "mfa"], name="demo", workspace_id=workspace_id,
                                      expires_in_days=30)
    return {"email": email, "password": password, "totp_secret": secret, "api_token": token,
            "api_token_id": record.id, "workspace_id": workspace_id}
