"""Sending a one-factor sign-in that cannot open its workspace to a page that says why, instead of an
``access_denied`` in the client's redirect URL.

A member of a workspace with ``enforce_mfa`` who has no second factor and signs in with an e-mailed code
gets a session whose ``amr`` shows no MFA; the authorization request they came from would refuse it.
``after_first_factor`` (``signin/password.py``) asks ``workspace_needing_mfa`` first and, when it names
a workspace, sends the browser to ``PAGE_PATH`` (``pages/routes.py``) with the same ``return_to``. The
session is kept: the security settings need it to set up a second factor.
"""
from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

from chalicelib.core.config import settings
from chalicelib.core.tenancy import get_workspace, workspaces_of

PAGE_PATH = "/signin/mfa-required"
AUTHORIZE_PATH = "/oauth2/authorize"  # identity/oauth/routes.py


def workspace_needing_mfa(user_id: str, return_to: str) -> str | None:
    """The MFA-enforced workspace the authorization request in ``return_to`` would choose for the user
    (its ``workspace_id``, else the user's first workspace, as ``oauth/authorize.py`` chooses), or None."""
    auth_url = settings().auth_url
    if not return_to.startswith(auth_url + AUTHORIZE_PATH + "?"):
        return None
    params = dict(parse_qsl(urlsplit(return_to).query))
    mine = [w["workspace_id"] for w in workspaces_of(user_id)]
    wanted = params.get("workspace_id") or (mine[0] if mine else "")
    if wanted not in mine:  # not a member: the authorization request answers that itself
        return None
    return wanted if get_workspace(wanted).enforce_mfa else None


def page_url(return_to: str, workspace_id: str) -> str:
    """The explanation page, carrying the relative ``return_to`` to come back to."""
    auth_url = settings().auth_url
    relative = return_to[len(auth_url):] if return_to.startswith(auth_url) else return_to
    return f"{auth_url}{PAGE_PATH}?{urlencode({'workspace_id': workspace_id, 'return_to': relative})}"


def sign_in_again_url(return_to: str) -> str:
    """The authorization request with ``prompt=login``: a fresh sign-in, this time with a second factor."""
    parts = urlsplit(return_to)
    params = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("prompt", "max_age")] + [("prompt", "login")]
    return f"{parts.path}?{urlencode(params)}"
