"""The policy-enforcing reader's cost on retrieval and chat: a Member's knowledge search and chat answer
over a dataset whose key column is under MASK and half of whose documents are restricted to Admins by
per-document ACLs (row-level policy), beside the same search and chat over an identical dataset without
either (key ALLOW, no document ACL), interleaved call by call in the same run. Each dataset is alone in its
own workspace, so a chat retrieves from it only. In-process, moto; the extractive provider."""
from __future__ import annotations

from bench.common import use_emulator

use_emulator()

N_DOCS = 1_000
ROWS_PER_DOC = 5
WORDS = ("refund", "invoice", "shipping", "warranty", "return", "order", "parcel", "credit", "voucher", "label",
         "courier", "customs", "tariff", "receipt", "payment", "account", "address", "delivery", "damage", "claim")


def _rows() -> list[tuple[str, ...]]:
    """``(_key, document_id, email, body)``: the e-mail is the row key."""
    from chalicelib.core.ids import new_id

    out = []
    for d in range(N_DOCS):
        doc = new_id("doc")
        for r in range(ROWS_PER_DOC):
            email = f"customer{d}x{r}@example.com"
            body = " ".join(WORDS[(d * 7 + r * 3 + i * 5) % len(WORDS)] for i in range(12))
            out.append((email, doc, email, body))
    return out


def main() -> None:
    from moto import mock_aws

    with mock_aws():
        _run()


def _run() -> None:
    from bench.common import measure_pair, table
    from chalicelib.chat import service as chat
    from chalicelib.core.authz import Principal
    from chalicelib.core.tenancy import scope_of
    from chalicelib.gateway import reader
    from chalicelib.knowledge import indexer
    from chalicelib.knowledge import service as knowledge
    from infra.bootstrap import bootstrap_all
    from tests.functional.conftest import make_tenant
    from tests.functional.gateway.data import field, put_dataset
    from tests.functional.platform.helpers import add_member

    bootstrap_all()
    rows = _rows()
    members = {}
    for kind, key_policy in (("plain", "ALLOW"), ("guarded", "MASK")):
        t = make_tenant(f"bench-{kind}@example.com", name=f"Reader {kind}")
        ws, region = t.workspace_id, t.region
        ds = put_dataset(ws, region, "tickets", [field("_key"), field("document_id"),
                                                 field("email", "STRING", "PII", key_policy), field("body")], rows)
        if kind == "guarded":
            admin = Principal(user_id=t.user_id, workspace_id=ws, roles=("admin",), email=t.email, amr=("pwd",),
                              token_id="b")
            for doc in sorted({r[1] for r in rows})[::2]:  # every other document: Admins only
                reader.set_document_acl(scope_of(admin), ds, doc, [{"type": "role", "id": "admin"}])
        indexer.index_dataset(region, ws, ds)
        m = add_member(ws, f"member-{kind}@example.com", "member")
        members[kind] = scope_of(Principal(user_id=m.user_id, workspace_id=ws, roles=("member",), email=m.email,
                                           amr=("pwd",), token_id="b"))

    queries = [" ".join(WORDS[(i * 3 + j) % len(WORDS)] for j in range(3)) for i in range(50)]
    state = {"plain": 0, "guarded": 0}

    def search(kind: str) -> object:
        state[kind] += 1
        return knowledge.search(members[kind], queries[state[kind] % len(queries)], 5)

    def ask(kind: str) -> object:
        state[kind] += 1
        q = queries[state[kind] % len(queries)]
        return chat.answer(members[kind], {"model": "builtin/extractive",
                                           "messages": [{"role": "user", "content": f"Which {q}?"}]})

    hits = knowledge.search(members["guarded"], queries[0], 50)
    assert hits and all("@example.com" not in repr(h.as_dict()) for h in hits)  # the key stays masked
    s_ours, s_ref = measure_pair("Member search, key MASK + half the documents restricted",
                                 lambda: search("guarded"), "same search, key ALLOW, no document ACL",
                                 lambda: search("plain"), n=60, repeat=5, warmup=10)
    c_ours, c_ref = measure_pair("Member chat answer, key MASK + half the documents restricted",
                                 lambda: ask("guarded"), "same chat, key ALLOW, no document ACL",
                                 lambda: ask("plain"), n=15, repeat=2, warmup=3)
    table(f"Reader: row-level ACL and key masking ({N_DOCS:,} documents, {len(rows):,} rows)",
          [(s_ours, s_ref, "within 10%"), (c_ours, c_ref, "within 10%")])
