"""Upload to searchable: a 50-page PDF and a 100-page Word file (both generated here: 5 paragraphs of ~90
words per page) put into a ``documents`` connector, synced by the real worker (the reader parses it, the
passages become the dataset, the knowledge index is rebuilt) and searched until the last page's words are
found, against in-process moto. Beside it, in the same run and interleaved: the parser alone
(``document_text.extract`` and the passage split, on bytes already in memory), so the share of the time
spent parsing is visible.
"""
from __future__ import annotations

import statistics
import time

from bench.common import quiet, use_emulator

REPEAT = 5
WORDS = ("return refund delivery order customer warehouse invoice shipping parcel policy days business "
         "account support request payment address carrier tracking label").split()


def _page_text(page: int, paragraph: int) -> str:
    words = [WORDS[(page * 7 + paragraph * 3 + i) % len(WORDS)] for i in range(90)]
    return f"Page {page} paragraph {paragraph}: " + " ".join(words) + "."


def _documents() -> dict[str, bytes]:
    from tests.fixtures import documents

    pdf_pages = ["\n\n".join(_page_text(p, k) for k in range(5)) for p in range(1, 51)]
    docx_paragraphs = [_page_text(p, k) for p in range(1, 101) for k in range(5)]
    return {"handbook-50-pages.pdf": documents.pdf(pdf_pages + [f"Last page marker zebrafinch{50}."]),
            "manual-100-pages.docx": documents.docx(docx_paragraphs + ["Last page marker zebrafinch100."])}


def main() -> None:
    use_emulator()
    import requests
    from moto import mock_aws

    from chalicelib.core import process_state
    from chalicelib.core.authz import Principal
    from chalicelib.core.config import settings
    from chalicelib.core.tenancy import scope_of
    from chalicelib.gateway.ingest import connectors, sync, sync_worker
    from chalicelib.gateway.ingest.sources import document_text
    from chalicelib.gateway.ingest.sources.documents import document_records
    from chalicelib.identity import users
    from chalicelib.knowledge import service as knowledge
    from chalicelib.platform.workspaces.service import create_workspace
    from chalicelib.workers.jobs import index_changed_dataset
    from infra.bootstrap import bootstrap_global, bootstrap_region

    settings.cache_clear()
    process_state.reset_all(derived=True)
    files = _documents()
    rows = []
    with mock_aws(), quiet():
        region = "us-east-1"
        bootstrap_global()
        bootstrap_region(region)
        user = users.create_user("bench-uploads@example.com", email_verified=True)
        ws = create_workspace(owner_id=user.id, owner_email=user.email, name="Bench uploads", residency="us-east",
                              enforce_mfa=False)
        principal = Principal(user.id, ws.id, ("admin",), user.email, ("pwd",), "bench")
        scope = scope_of(principal)
        for name, data in files.items():
            marker = "zebrafinch" + name.split("-")[1]
            parse_s, total_s, passages = [], [], 0
            for attempt in range(REPEAT):
                t0 = time.perf_counter()
                pages = document_text.extract(name, data)
                passages = len(document_records("doc_x", name, "k", "2026-01-01 00:00:00", pages, 1000, 100))
                parse_s.append(time.perf_counter() - t0)

                conn = connectors.create_connector(scope, {"name": f"Bench {name} {attempt}", "kind": "documents",
                                                               "config": {}}, None)
                t0 = time.perf_counter()
                up = connectors.create_upload(scope, conn["id"], {"file_name": name}, None)
                put = requests.put(up["upload_url"], data=data, headers=up["headers"], timeout=60)
                assert put.status_code == 200, put.text
                run = sync.request_sync(scope, conn["id"], mode="INCREMENTAL")
                out = sync_worker.run_sync(ws.id, run["id"], on_changed=index_changed_dataset)
                assert out.status == "done", out
                hits = knowledge.search(scope_of(principal), f"last page marker {marker}", 3)
                total_s.append(time.perf_counter() - t0)
                assert any(marker in h.chunk.text for h in hits), [h.chunk.text[:60] for h in hits]
                connectors.delete_connector(scope, conn["id"], None)
            rows.append((name, len(data), passages, parse_s, total_s))
    print("| Document | Size | Passages | Parser alone, median [min-max] | Upload to searchable, median [min-max] "
          "| Parser share |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, size, passages, parse_s, total_s in rows:
        parse, total = statistics.median(parse_s), statistics.median(total_s)
        print(f"| {name} | {size / 1024:.0f} KiB | {passages} | {parse * 1000:.0f} ms [{min(parse_s) * 1000:.0f}-"
              f"{max(parse_s) * 1000:.0f}] | {total * 1000:.0f} ms [{min(total_s) * 1000:.0f}-{max(total_s) * 1000:.0f}] | "
              f"{parse / total * 100:.0f}% |")
    print(f"\nMedian of {REPEAT} runs each, interleaved (parser, then the whole path on a new connector). The whole "
          "path: presigned PUT into moto's S3, the sync worker (download, parse, split, write the dataset's Parquet "
          "snapshot, commit), the knowledge index rebuilt for the dataset, and one search finding the last page.")


if __name__ == "__main__":
    main()
