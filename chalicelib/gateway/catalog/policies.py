"""The policies a caller may see: ACL (per readable dataset), PII (per visible field that is classified
PII or carries a policy other than ALLOW) and the residency of the caller's workspace."""
from __future__ import annotations

from typing import Any

from chalicelib.core.authz import require
from chalicelib.core.http.errors import validation_error
from chalicelib.core.regions import RESIDENCIES
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway.catalog import service as catalog

SCOPES = ("ACL", "PII", "RESIDENCY")


def list_policies(scope: RequestScope, of: str | None = None) -> list[dict[str, Any]]:
    """The policies of ``of`` (one of ``SCOPES``; all when None) the caller may see."""
    principal = scope.principal
    require(principal, "policies.read")
    if of is not None and of.upper() not in SCOPES:
        raise validation_error([{"field": "scope", "message": "must be one of " + ", ".join(SCOPES)}])
    wanted = (of.upper(),) if of else SCOPES
    out: list[dict[str, Any]] = []
    datasets = catalog.readable(scope) if ("ACL" in wanted or "PII" in wanted) else []
    if "ACL" in wanted:
        for rec in datasets:
            out.append(_base(f"acl:{rec.id}", "ACL", rec) | {"principals": [dict(a) for a in rec.acl]})
    if "PII" in wanted:
        for rec in datasets:
            for f in catalog.visible_fields(principal, rec):
                if f["classification"] == "PII" or f["policy"] != "ALLOW":
                    out.append(_base(f"pii:{rec.id}:{f['name']}", "PII", rec) | {
                        "field": f["name"], "classification": f["classification"], "policy": f["policy"]})
    if "RESIDENCY" in wanted:
        ws = scope.entry()
        entry = RESIDENCIES.get(ws.residency)
        out.append({"id": f"residency:{ws.id}", "scope": "RESIDENCY", "dataset_id": None, "dataset_name": None,
                    "field": None, "classification": None, "policy": None, "principals": None,
                    "residency": ws.residency, "region": ws.region, "replication": ws.replication,
                    "description": f"Workspace content stays in {entry.name if entry else ws.residency} ({ws.region})."})
    return out


def _base(pid: str, scope: str, rec: catalog.DatasetRecord) -> dict[str, Any]:
    return {"id": pid, "scope": scope, "dataset_id": rec.id, "dataset_name": rec.name, "field": None,
            "classification": None, "policy": None, "principals": None, "residency": None, "region": None,
            "replication": None, "description": ""}
