"""Account settings API at {auth_url}/account (cookie session + CSRF)."""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.core.web import Api

bp = Blueprint(__name__)
api = Api(bp, "identity")
