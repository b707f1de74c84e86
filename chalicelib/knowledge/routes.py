"""Knowledge routes at {gateway_url}: retrieval and per-document ACLs (the dataset's row-level policy,
kept and enforced by ``gateway/reader.py`` on every path). Thin: every view calls a service.

The service loads NumPy and the retrieval libraries, so each view imports it at its first call: the gateway's
cold start does not pay for them (``bench_packaging``, cold import per group)."""
from __future__ import annotations

from typing import Any

from chalicelib.core.http.api import Api, Ctx
from chalicelib.core.http.errors import validation_error
from chalicelib.core.http.paging import check_params
from chalicelib.core.http.validation import F, query_int, validate
from chalicelib.gateway import reader

api = Api("gateway")
SEARCH_PARAMS = ("q", "k", "kind", "dataset_id")


@api.route("/v1/knowledge/search", permission="knowledge.read")
def search(ctx: Ctx) -> dict[str, Any]:
    from chalicelib.knowledge import service  # noqa: PLC0415 - knowledge loads NumPy and bm25s: at first use, not at cold start

    q = ctx.query
    check_params(q, SEARCH_PARAMS)
    filters: dict[str, Any] = {}
    if "kind" in q:
        filters["kinds"] = q["kind"].split(",")
    if "dataset_id" in q:
        filters["dataset_ids"] = q["dataset_id"].split(",")
    if "q" not in q:
        raise validation_error([{"field": "q", "message": "is required"}])
    k = query_int(q, "k", 5, minimum=1, maximum=service.MAX_K)
    hits = service.search(ctx.scope, q["q"], k, filters)
    return {"query": q["q"], "k": k, "filters": filters, "items": [h.as_dict() for h in hits]}


@api.route("/v1/knowledge/datasets/{dataset_id}/documents/{document_id}/acl", ["PUT"],
           permission="connectors.manage")
def put_document_acl(ctx: Ctx, dataset_id: str, document_id: str) -> dict[str, Any]:
    body = validate(ctx.json(), {"acl": F(list, required=True, max_len=100)})
    return reader.set_document_acl(ctx.scope, dataset_id, document_id, body["acl"], caller=ctx.caller)
