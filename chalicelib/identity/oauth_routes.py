"""OAuth 2.0 / OIDC provider routes at {auth_url}: authorize, userinfo, revoke (token grants live in
``oauth.GRANTS`` and are served by ``routes.token``)."""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.core.web import Api

bp = Blueprint(__name__)
api = Api(bp, "identity")
