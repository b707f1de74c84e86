"""A SCIM token of a tenant's workspace and calls to its SCIM endpoints through the Chalice test client;
``replay`` runs a recorded request sequence (``tests/fixtures/scim/*.json``)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chalice.test import Client

from chalicelib.core.tenancy import membership
from chalicelib.groups import create_app
from tests.functional.conftest import Tenant
from tests.functional.platform.helpers import call

APP = create_app("platform")
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "scim"
SCIM_JSON = "application/scim+json"


def scim_token(client: Client, tenant: Tenant, name: str = "IdP") -> str:
    status, body, _ = call(client, "POST", f"/v1/workspaces/{tenant.workspace_id}/scim/tokens", tenant.token,
                           {"name": name})
    assert status == 201, body
    return str(body["token"])


def scim(client: Client, tenant: Tenant, token: str | None, method: str, path: str, body: Any = None,
         headers: dict[str, str] | None = None, raw: bytes | None = None) -> tuple[int, Any, dict[str, str]]:
    h = {"Content-Type": SCIM_JSON, **(headers or {})}
    if token:
        h["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
    r = client.http.request(method, f"/scim/v2/{tenant.workspace_id}{path}", headers=h, body=data)
    return r.status_code, (json.loads(r.body) if r.body else None), r.headers


def at(doc: Any, path: str) -> Any:
    """``a.0.b`` in ``doc`` (a key may hold dots when it is a schema URN: the longest known key wins)."""
    node = doc
    rest = path
    while rest:
        if isinstance(node, list):
            head, _, rest = rest.partition(".")
            node = node[int(head)]
            continue
        key = next((k for k in sorted(node, key=len, reverse=True) if rest == k or rest.startswith(k + ".")), None)
        assert key is not None, (path, doc)
        node, rest = node[key], rest[len(key) + 1:]
    return node


def replay(client: Client, tenant: Tenant, token: str, name: str) -> dict[str, str]:
    """Run ``name``'s recorded steps; check each status, the expected values, absent keys, and whether the
    user is a member of the workspace and of the group after the step. Returns the saved ids."""
    saved: dict[str, str] = {}

    def fill(value: Any) -> Any:
        text = json.dumps(value)
        for k, v in saved.items():
            text = text.replace("{" + k + "}", v)
        return json.loads(text)

    for i, step in enumerate(json.loads((FIXTURES / f"{name}.json").read_text())["steps"]):
        status, body, headers = scim(client, tenant, token, step["method"], fill(step["path"]),
                                     fill(step["body"]) if "body" in step else None)
        assert status == step["status"], (i, step, body)
        if body is not None:
            assert headers["Content-Type"] == SCIM_JSON, (i, headers)
        for path, want in fill(step.get("expect", {})).items():
            assert at(body, path) == want, (i, path, body)
        for key in step.get("absent", []):
            assert key not in body, (i, key, body)
        for key, field in step.get("save", {}).items():
            saved[key] = body[field]
        if "member" in step:
            assert (membership(tenant.workspace_id, saved["user"]) is not None) == step["member"], (i, step)
        if "in_group" in step:
            m = membership(tenant.workspace_id, saved["user"])
            assert m is not None and (saved["group"] in (m.groups or ())) == step["in_group"], (i, step)
    return saved
