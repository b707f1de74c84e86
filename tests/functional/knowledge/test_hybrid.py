"""Hybrid retrieval when an embedding model is configured (the offline ``builtin/wordllama``): vectors
are stored with the index, fused with BM25, and permissions still apply before any score."""
from __future__ import annotations

import io

import numpy as np
import pytest

from chalicelib.core import aws
from chalicelib.core.tenancy import scope_of
from chalicelib.knowledge import indexer, service, store
from tests.functional.chat import helpers
from tests.functional.conftest import Tenant
from tests.functional.gateway.data import field
from tests.functional.knowledge.helpers import put_keyed
from tests.functional.knowledge.test_search import service_principal


def test_hybrid_stores_vectors_and_keeps_permissions(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.use_providers(monkeypatch, {"embeddings": {"model": "builtin/wordllama"}})
    ws, region = tenant.workspace_id, tenant.region
    open_ds = put_keyed(ws, region, "faq", [field("answer")], [
        ("Refunds are paid to the original card within five business days.",),
        ("Our office dog is called Biscuit.",)])
    secret = put_keyed(ws, region, "secret_faq", [field("answer")], [
        ("Refund money reaches the card in five days for executives.",)], acl=[{"type": "role", "id": "admin"}])
    for ds in (open_ds, secret):
        indexer.index_dataset(region, ws, ds)
    m = store.manifests(region, ws).indexes[open_ds]
    assert m.embedding_model == "builtin/wordllama"
    raw = aws.client("s3", region).get_object(Bucket=aws.bucket_name("knowledge", region),
                                              Key=m.prefix + store.VECTORS)["Body"].read()
    vectors = np.load(io.BytesIO(raw))
    assert vectors.shape == (2, 256)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    from chalicelib.core.authz import Principal
    from chalicelib.core.tenancy import membership
    from tests.functional.gateway.data import token_for

    member = token_for(ws, "member")
    p = Principal(user_id=member.user_id, workspace_id=ws, roles=(membership(ws, member.user_id).role,),
                  email=member.email, amr=("pwd",), token_id="t")
    hits = service.search(scope_of(p), "how fast do I get my money back", 5)
    assert hits
    assert all(h.chunk.dataset_id != secret for h in hits)
    assert "Refunds are paid" in hits[0].chunk.text
    admin_hits = service.search(scope_of(service_principal(tenant)), "refund money card five days", 5)
    assert {h.chunk.dataset_id for h in admin_hits} == {open_ds, secret}
    lexical = service.search(scope_of(p), "how fast do I get my money back", 5, mode="lexical")
    assert all(h.chunk.dataset_id != secret for h in lexical)
