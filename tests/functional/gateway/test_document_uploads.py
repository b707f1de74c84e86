"""Documents of every supported format synced through the documents connector, and every unreadable
file skipped whole with its reason on the sync run (nothing of it indexed, the good files indexed).
A cited passage of a PDF names its page. Files built to be expensive to read (many pages sharing one
compressed content stream, millions of text operators in one stream, Word XML that expands 150 times) are
skipped by name within the parse bounds (set low here) while the good file indexes, in one attempt."""
from __future__ import annotations

import time
from typing import Any

import requests

from chalicelib.core.config import settings
from chalicelib.knowledge import indexer
from tests.fixtures import documents
from tests.functional.conftest import Tenant
from tests.functional.gateway.sync_helpers import READER_ROLE, call, client, drain, rows_of, token_for


def _upload(c, tenant: Tenant, conn_id: str, name: str, data: bytes) -> str:
    st, up = call(c, "POST", f"/v1/connectors/{conn_id}/uploads", tenant.token, {"file_name": name})
    assert st == 201, up
    r = requests.put(up["upload_url"], data=data, headers=up["headers"], timeout=10)
    assert r.status_code == 200, r.text
    return up["document_id"]


def test_every_format_indexed_and_every_bad_file_named(tenant: Tenant) -> None:
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Policies", "kind": "documents",
                                                                      "config": {}})
        assert st == 201, conn
        good = {
            "terms.pdf": documents.pdf(["Orders ship within two days.", "Refunds are paid within 14 days of the "
                                                                        "return arriving at the warehouse."]),
            "leave.docx": documents.docx(["Everyone gets 25 leave days."]),
            "office.html": b"<html><body><h1>Office</h1><p>The office opens at 8.</p><script>x()</script></body>",
            "faq.md": b"# FAQ\n\nParking is free for staff.",
            "notes.txt": b"Lunch is served at noon.",
        }
        bad = {
            "scan.pdf": (documents.scanned_pdf(), "no text layer"),
            "locked.pdf": (documents.encrypted_pdf("Locked secret passage."), "password-protected"),
            "bomb.docx": (documents.zip_bomb(250), "zip bomb"),
            "empty.txt": (b"", "0 bytes"),
            "renamed.txt": (documents.pdf(["Renamed secret passage."]), "holds a PDF"),
        }
        ids = {name: _upload(c, tenant, conn["id"], name, data) for name, data in good.items()}
        for name, (data, _) in bad.items():
            _upload(c, tenant, conn["id"], name, data)
        st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "INCREMENTAL"})
        assert st == 202, run
        drain(tenant.region)
        run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
        assert run["status"] == "SUCCEEDED", run
        assert len(run["skipped"]) == len(bad), run["skipped"]
        for name, (_, words) in bad.items():
            assert any(s.startswith(name) and words in s for s in run["skipped"]), (name, run["skipped"])
        cols, rows = rows_of(tenant, conn["dataset"]["id"])
        passages = [dict(zip(cols, r, strict=True)) for r in rows]
        assert {p["file_name"] for p in passages} == set(good)
        assert {p["document_id"] for p in passages} == set(ids.values())
        text = " ".join(p["text"] for p in passages)
        assert "Locked secret passage" not in text and "Renamed secret passage" not in text
        assert "x()" not in text
        pdf_pages = sorted((p["page"], p["text"][:12]) for p in passages if p["file_name"] == "terms.pdf")
        assert pdf_pages == [(1, "Orders ship "), (2, "Refunds are ")]
        assert all(p["page"] is None for p in passages if p["file_name"] != "terms.pdf")

        indexer.index_dataset(tenant.region, tenant.workspace_id, conn["dataset"]["id"])
        r = c.http.get("/v1/knowledge/search?q=refunds+paid+return+warehouse",
                       headers={"Authorization": f"Bearer {tenant.token}"})
        assert r.status_code == 200, r.body
        top = r.json_body["items"][0]["citation"]
        assert top["title"] == "terms.pdf, page 2", top
        assert top["source"]["id"] == ids["terms.pdf"]


def test_check_access_probes_the_source_now(tenant: Tenant) -> None:
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {
            "name": "Orders", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": "no-such-bucket-here"}})
        assert st == 201, conn
        st, checked = call(c, "POST", f"/v1/connectors/{conn['id']}/check", tenant.token)
        assert st == 200, checked
        assert checked["status"] == "FAILING"
        assert checked["health"]["last_error"] and checked["health"]["last_checked_at"]
        assert call(c, "POST", f"/v1/connectors/{conn['id']}/check", token_for(tenant, "viewer"))[0] == 403
        assert call(c, "POST", "/v1/connectors/conn_01ABCDEFGHJKMNPQRSTVWXYZ00/check", tenant.token)[0] == 404


def test_documents_built_to_be_expensive_are_skipped_by_name_and_never_retried(tenant: Tenant,
                                                                               monkeypatch: Any) -> None:
    monkeypatch.setenv("DOCUMENT_PARSE_CPU_SECONDS", "1")
    monkeypatch.setenv("DOCUMENT_MAX_CONTENT_MB", "8")
    settings.cache_clear()  # settings are read once from the environment
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Hostile", "kind": "documents",
                                                                      "config": {}})
        assert st == 201, conn
        bad = {
            "pages.pdf": (documents.shared_stream_pdf(), "page content"),  # 1,000 pages x 85 KiB, 1.1 KiB on disk
            "operators.pdf": (documents.operator_flood_pdf(1_000_000), "more than 1 s of processing"),
            "expands.docx": (documents.expanding_docx(8, ratio=150), "zip bomb"),
        }
        assert all(len(data) < 100_000 for data, _ in bad.values())
        for name, (data, _) in bad.items():
            _upload(c, tenant, conn["id"], name, data)
        # read after the one whose parse was killed: by a new child
        good = _upload(c, tenant, conn["id"], "good.pdf", documents.pdf(["Staff parking is free on Fridays."]))
        st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "INCREMENTAL"})
        assert st == 202, run
        started = time.monotonic()
        results = drain(tenant.region)
        assert time.monotonic() - started < 60  # bounded: 1 s of CPU per file (unbounded: minutes)
        assert len(results) == 1 and results[0]["batchItemFailures"] == []  # one delivery, no retry
        run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
        assert run["status"] == "SUCCEEDED" and run["attempts"] == 1, run
        assert len(run["skipped"]) == len(bad), run["skipped"]
        for name, (_, words) in bad.items():
            assert any(s.startswith(name) and words in s for s in run["skipped"]), (name, run["skipped"])
        cols, rows = rows_of(tenant, conn["dataset"]["id"])
        passages = [dict(zip(cols, r, strict=True)) for r in rows]
        assert {p["document_id"] for p in passages} == {good}
        assert "Staff parking is free" in passages[0]["text"]

        # the next sync does not read them again: a file over a bound fails the same way every time
        st, again = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "INCREMENTAL"})
        drain(tenant.region)
        again = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{again['id']}", tenant.token)[1]
        assert again["status"] == "SUCCEEDED" and again["skipped"] == [] and again["attempts"] == 1, again


def test_files_left_when_the_reading_time_runs_out_are_named_and_read_by_the_next_sync(tenant: Tenant,
                                                                                      monkeypatch: Any) -> None:
    """A sync stops starting new files once its reading time is spent (so many slow files cannot push it
    past the worker's timeout into a retry loop); the files left keep their old version in the cursor."""
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Later", "kind": "documents", "config": {}})
        assert st == 201, conn
        ids = {_upload(c, tenant, conn["id"], name, f"Notes about {name}.".encode()) for name in ("a.txt", "b.txt")}

        def sync() -> dict:
            st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": "INCREMENTAL"})
            assert st == 202, run
            drain(tenant.region)
            return call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]

        monkeypatch.setenv("DOCUMENT_SYNC_PARSE_SECONDS", "0")
        settings.cache_clear()  # settings are read once from the environment
        run = sync()
        assert run["status"] == "SUCCEEDED" and run["rows_written"] == 0, run
        assert sorted(s.split(" ", 1)[0] for s in run["skipped"]) == ["a.txt", "b.txt"]
        assert all("the next sync reads it" in s for s in run["skipped"])
        monkeypatch.delenv("DOCUMENT_SYNC_PARSE_SECONDS")
        settings.cache_clear()  # settings are read once from the environment
        run = sync()
        assert run["status"] == "SUCCEEDED" and run["skipped"] == [], run
        cols, rows = rows_of(tenant, conn["dataset"]["id"])
        assert {dict(zip(cols, r, strict=True))["document_id"] for r in rows} == ids
