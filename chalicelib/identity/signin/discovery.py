"""Identifier-first discovery: which way an e-mail address signs in.

A verified, enabled SSO connection for the address's domain takes over (its button replaces the
password field). Every other address gets the same list of methods whether or not an account
exists (passkey, e-mailed code, password): listing one user's own methods would reveal that the
account exists, so each method instead fails the same way for unknown and known addresses, and an
unknown address that asks for an e-mailed code simply becomes a new account.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from chalicelib.core.config import settings
from chalicelib.identity.sso import connections as sso_config

METHODS = ("passkey", "email_code", "password")


def discover(email: str, return_to: str | None) -> dict[str, Any]:
    domain = email.rsplit("@", 1)[-1].strip().lower()
    conn = sso_config.routed(domain)
    if conn is not None:
        params = {"domain": conn.domain, "login_hint": email}
        if return_to:
            params["return_to"] = return_to  # checked again by /sso/start
        query = urlencode(params)
        return {"next": "sso", "methods": ["sso"],
                "provider": {"name": conn.display_name, "kind": conn.kind,
                             "url": f"{settings().auth_url}/sso/start?{query}"}}
    return {"next": "methods", "methods": list(METHODS), "provider": None}
