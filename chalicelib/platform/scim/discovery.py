"""SCIM discovery (RFC 7644 section 4): ServiceProviderConfig, Schemas and ResourceTypes, derived from the
``scim2-models`` resource classes the endpoints validate with (one source for both)."""
from __future__ import annotations

from typing import Any

from scim2_models import Context, EnterpriseUser, Group, ResourceType, User

from chalicelib.core.tenancy import RequestScope
from chalicelib.platform.scim import protocol

SPC_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE)  # type: ignore[no-any-return]


def _meta(scope: RequestScope, kind: str, path: str) -> dict[str, Any]:
    return {"resourceType": kind, "location": f"{protocol.base_url(scope)}/{path}"}


def service_provider_config(scope: RequestScope) -> dict[str, Any]:
    return {
        "schemas": [SPC_SCHEMA],
        "patch": {"supported": True}, "bulk": {"supported": False, "maxOperations": 0, "maxPayloadSize": 0},
        "filter": {"supported": True, "maxResults": protocol.MAX_COUNT}, "changePassword": {"supported": False},
        "sort": {"supported": False}, "etag": {"supported": True},
        "authenticationSchemes": [{"type": "oauthbearertoken", "name": "Workspace SCIM token", "primary": True,
                                   "description": "A bearer token an Admin creates at "
                                                  "POST /v1/workspaces/{workspace_id}/scim/tokens"}],
        "meta": _meta(scope, "ServiceProviderConfig", "ServiceProviderConfig"),
    }


def schemas(scope: RequestScope) -> list[dict[str, Any]]:
    out = []
    for model in (User, EnterpriseUser, Group):
        schema = _dump(model.to_schema())
        schema["meta"] = _meta(scope, "Schema", f"Schemas/{schema['id']}")
        out.append(schema)
    return out


def resource_types(scope: RequestScope) -> list[dict[str, Any]]:
    out = []
    for model in (User[EnterpriseUser], Group):
        rt = _dump(ResourceType.from_resource(model))
        rt["meta"] = _meta(scope, "ResourceType", f"ResourceTypes/{rt['id']}")
        out.append(rt)
    return out
