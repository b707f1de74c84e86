"""The invitation page's summary: only the invited address reads the workspace's name, the inviter and the
role; anyone else (another user, a wrong workspace, a made-up id) gets the same 404."""
from __future__ import annotations

from chalice.test import Client

from chalicelib.core import clock
from chalicelib.core.audit import Actor
from chalicelib.core.tenancy import workspace_scope
from chalicelib.groups import create_app
from chalicelib.identity import users
from chalicelib.identity.oauth.signing import issue_access_token
from chalicelib.platform.workspaces import invitations
from tests.functional.conftest import Tenant, bearer


def _user_token(email: str) -> str:
    user = users.create_user(email, email_verified=True)
    token, _ = issue_access_token(user_id=user.id, email=email, workspace_id="", roles=[], amr=["otp"])
    return token


def test_only_the_invited_address_reads_the_invitation(tenant: Tenant) -> None:
    inv = invitations.create(workspace_scope(tenant.workspace_id), {"email": "guest@example.com", "role": "viewer"},
                             actor=Actor("user", "usr_admin", "boss@example.com"))
    path = f"/v1/workspaces/{tenant.workspace_id}/invitations/{inv['id']}/preview"
    with Client(create_app("platform")) as c:
        r = c.http.get(path, headers=bearer(_user_token("guest@example.com")))
        assert r.status_code == 200, r.body
        got = r.json_body
        assert got["workspace"]["id"] == tenant.workspace_id and got["workspace"]["name"]
        assert got["role"] == "viewer" and got["invited_by"] == {"email": "boss@example.com"}
        assert got["status"] == "pending" and got["expires_at"] > clock.iso()
        other = _user_token("someone@example.com")
        assert c.http.get(path, headers=bearer(other)).status_code == 404
        assert c.http.get(path.replace(inv["id"], "inv_nope"), headers=bearer(other)).status_code == 404
        assert c.http.get(path.replace(tenant.workspace_id, "ws_nope"), headers=bearer(other)).status_code == 404
        accept = path.replace(tenant.workspace_id, "ws_nope").replace("/preview", "/accept")
        gone = c.http.post(accept, headers={**bearer(other), "Content-Type": "application/json"}, body=b"{}")
        assert gone.status_code == 404 and gone.json_body["code"] == "not_found", gone.body
        assert c.http.get(path).status_code == 401
