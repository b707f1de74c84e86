"""The reader's row-level rules without AWS: who a per-document ACL admits, which documents a caller loses,
the SQL that drops them (run on DuckDB), how documents are named, and which lineage answers are shown."""
from __future__ import annotations

import json
from typing import Any

import duckdb

from chalicelib.core.authz import Principal
from chalicelib.gateway import reader
from chalicelib.gateway.catalog import records
from chalicelib.gateway.catalog import service as catalog

WS = "ws_01HZZZZZZZZZZZZZZZZZZZZZZ1"


def _principal(role: str, user: str = "usr_1") -> Principal:
    return Principal(user_id=user, workspace_id=WS, roles=(role,), email=f"{user}@example.com", amr=("pwd",),
                     token_id="t")


def _record(row_acl: dict[str, Any], doc_policy: str = "ALLOW") -> catalog.DatasetRecord:
    rec = catalog.DatasetRecord(
        id="ds_1", workspace_id=WS, name="docs", connector_id=None, owner="o", description="",
        fields=[{"name": "document_id", "type": "STRING", "policy": doc_policy}, {"name": "text", "type": "STRING",
                                                                                  "policy": "ALLOW"}],
        acl=[{"type": "role", "id": "member"}], data_prefix="p", row_count=3, schema_version=1,
        last_synced_at=None, created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z",
        classification="INTERNAL")
    rec.acl_keys = frozenset({"role:member"})
    rec.row_acl = records.parse_row_acl(json.dumps(row_acl))
    return rec


ACLS = {"doc_admins": [{"type": "role", "id": "admin"}], "doc_bob": [{"type": "user", "id": "usr_bob"}],
        "doc_members": [{"type": "role", "id": "member"}], "doc_nobody": []}


def test_hidden_rows_per_caller() -> None:
    rec = _record(ACLS)
    assert reader.hidden_rows(_principal("member"), rec) == {"doc_admins", "doc_bob", "doc_nobody"}
    assert reader.hidden_rows(_principal("member", "usr_bob"), rec) == {"doc_admins", "doc_nobody"}
    assert reader.hidden_rows(_principal("admin"), rec) == frozenset()
    assert reader.hidden_rows(_principal("member"), _record({})) == frozenset()


def test_an_acl_that_is_not_a_list_admits_only_admins() -> None:
    rec = _record({"doc_x": "admin"})
    assert reader.hidden_rows(_principal("member"), rec) == {"doc_x"}
    assert reader.row_acl_allows(_principal("admin"), rec.row_acl["doc_x"])


def test_row_filter_drops_exactly_the_hidden_documents() -> None:
    view = reader.View(_record(ACLS), (), frozenset({"doc_admins", "doc_nobody"}))
    where, params = view.row_filter()
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('doc_admins', 'a'), ('doc_members', 'b'), "
                "(NULL, 'c'), ('doc_nobody', 'd')) v(document_id, text)")
    kept = sorted(r[0] for r in con.execute(f"SELECT text FROM t{where}", params).fetchall())
    assert kept == ["b", "c"]
    assert reader.View(_record({}), (), frozenset()).row_filter() == ("", {})


def test_documents_are_named_by_id_only_under_allow(monkeypatch: Any) -> None:
    monkeypatch.setattr(reader, "opaque", lambda region, ws, purpose, *parts: f"h({purpose},{','.join(parts)})")
    assert reader.document_ref(_record({}), "doc_7") == "doc_7"
    masked = reader.document_ref(_record({}, doc_policy="MASK"), "doc_7")
    assert masked == "docref_h(document,ds_1,doc_7)"


def test_chat_answers_in_lineage_only_for_their_user() -> None:
    me = _principal("member", "usr_me")
    assert reader.answer_visible(me, "CHAT_ANSWER", {"user_id": "usr_me"})
    assert not reader.answer_visible(me, "CHAT_ANSWER", {"user_id": "usr_other"})
    assert not reader.answer_visible(_principal("admin"), "CHAT_ANSWER", {"user_id": "usr_other"})
    assert not reader.answer_visible(me, "CHAT_ANSWER", {})  # recorded without its user: nobody
    assert reader.answer_visible(me, "QUERY", {})
