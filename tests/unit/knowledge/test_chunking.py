"""Chunks: stable ids, character spans, and only ALLOW fields ever enter a chunk."""
from __future__ import annotations

from chalicelib.knowledge import chunking


def _f(name: str, policy: str = "ALLOW") -> dict[str, str]:
    return {"name": name, "policy": policy}


def test_row_chunks_hold_only_allow_fields_and_ids_are_stable() -> None:
    fields = [_f("_key"), _f("name"), _f("email", "MASK"), _f("phone", "HASH"), _f("note", "REDACT"),
              _f("ssn", "DENY"), _f("city")]
    names = ["_key", "name", "email", "phone", "note", "ssn", "city"]
    rows = [("k1", "Ada", "ada@example.com", "+1 555", "secret", "111-22", "Berlin")]
    a = chunking.row_chunks("ds_1", "people", "snap1", fields, names, rows)
    b = chunking.row_chunks("ds_1", "people", "snap2", fields, names, rows)
    assert [c.text for c in a] == ["name: Ada; city: Berlin"]
    assert a[0].fields == ("name", "city")
    assert (a[0].start, a[0].end) == (0, len(a[0].text))
    assert a[0].id == b[0].id  # same text at the same place: same id on every re-index
    for secret in ("ada@example.com", "+1 555", "secret", "111-22"):
        assert secret not in a[0].text
    changed = chunking.row_chunks("ds_1", "people", "snap3", fields, names, [rows[0][:6] + ("Paris",)])
    assert changed[0].id != a[0].id


def test_document_chunks_keep_document_offsets_and_need_text_allowed() -> None:
    fields = [_f(n) for n in chunking.DOC_FIELDS]
    names = list(chunking.DOC_FIELDS)
    rows = [("doc_1", "a.md", "Second paragraph.", 40, 57)]
    (c,) = chunking.document_chunks("ds_1", "snap", fields, names, rows)
    assert (c.doc, c.title, c.start, c.end, c.kind) == ("doc_1", "a.md", 40, 57, "document")
    masked = [_f(n, "MASK" if n == "text" else "ALLOW") for n in chunking.DOC_FIELDS]
    assert chunking.document_chunks("ds_1", "snap", masked, names, rows) == []
