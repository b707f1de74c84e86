"""Chunks: stable ids, character spans, only ALLOW fields ever enter a chunk, and a row's key (whatever
its policy) enters only as a keyed hash."""
from __future__ import annotations

import hashlib
import hmac

from chalicelib.knowledge import chunking

KEY = b"k" * 32


def ident(*parts: str) -> str:
    """A keyed hash as ``gateway/reader.opaque_ref`` makes one (a fixed key here)."""
    return hmac.new(KEY, "\x1f".join(parts).encode(), hashlib.sha256).hexdigest()[:32]


def doc_ref(doc: str) -> str:
    return doc  # document_id under ALLOW


def _f(name: str, policy: str = "ALLOW") -> dict[str, str]:
    return {"name": name, "policy": policy}


def test_row_chunks_hold_only_allow_fields_and_ids_are_stable() -> None:
    fields = [_f("_key"), _f("name"), _f("email", "MASK"), _f("phone", "HASH"), _f("note", "REDACT"),
              _f("ssn", "DENY"), _f("city")]
    names = ["_key", "name", "email", "phone", "note", "ssn", "city"]
    rows = [("k1", "Ada", "ada@example.com", "+1 555", "secret", "111-22", "Berlin")]
    a = chunking.row_chunks("ds_1", "people", "snap1", fields, names, rows, ident, doc_ref)
    b = chunking.row_chunks("ds_1", "people", "snap2", fields, names, rows, ident, doc_ref)
    assert [c.text for c in a] == ["name: Ada; city: Berlin"]
    assert a[0].fields == ("name", "city")
    assert (a[0].start, a[0].end) == (0, len(a[0].text))
    assert a[0].id == b[0].id  # same text at the same place: same id on every re-index
    for secret in ("ada@example.com", "+1 555", "secret", "111-22"):
        assert secret not in a[0].text
    changed = chunking.row_chunks("ds_1", "people", "snap3", fields, names, [rows[0][:6] + ("Paris",)], ident,
                                  doc_ref)
    assert changed[0].id != a[0].id


def test_a_masked_key_column_is_nowhere_in_a_chunk() -> None:
    """The row key is the e-mail under MASK: not in the text, the id, the doc or the title."""
    fields = [_f("_key"), _f("email", "MASK"), _f("city")]
    names = ["_key", "email", "city"]
    (c,) = chunking.row_chunks("ds_1", "people", "s", fields, names,
                               [("ada@example.com", "ada@example.com", "Berlin")], ident, doc_ref)
    assert "ada@example.com" not in repr(c.to_json())
    assert c.doc == "row_" + ident("row", "ada@example.com")[:24]
    assert c.title == f"people row {c.doc[4:16]}"
    assert c.fields == ("city",)
    # an unkeyed digest of a guessed key does not confirm it
    assert hashlib.sha256(b"ada@example.com").hexdigest()[:24] not in repr(c.to_json())


def test_a_row_with_a_document_belongs_to_it() -> None:
    fields = [_f("_key"), _f("document_id"), _f("body")]
    (c,) = chunking.row_chunks("ds_1", "notes", "s", fields, ["_key", "document_id", "body"],
                               [("n1", "doc_7", "hello")], ident, doc_ref)
    assert c.doc == "doc_7"
    assert "document_id" in c.fields  # its id is in the clear: the mask must see the field


def test_document_chunks_keep_document_offsets_and_need_text_allowed() -> None:
    fields = [_f(n) for n in chunking.DOC_FIELDS]
    names = list(chunking.DOC_FIELDS)
    rows = [("doc_1", "a.md", "Second paragraph.", 40, 57)]
    (c,) = chunking.document_chunks("ds_1", "snap", fields, names, rows, ident, doc_ref)
    assert (c.doc, c.title, c.start, c.end, c.kind) == ("doc_1", "a.md", 40, 57, "document")
    assert set(c.fields) == {"text", "file_name", "document_id"}  # every field shown in the clear
    masked = [_f(n, "MASK" if n == "text" else "ALLOW") for n in chunking.DOC_FIELDS]
    assert chunking.document_chunks("ds_1", "snap", masked, names, rows, ident, doc_ref) == []


def test_a_file_name_under_a_policy_is_not_the_title() -> None:
    fields = [_f(n, "HASH" if n == "file_name" else "ALLOW") for n in chunking.DOC_FIELDS]
    (c,) = chunking.document_chunks("ds_1", "snap", fields, list(chunking.DOC_FIELDS),
                                    [("doc_1", "salaries-ada.md", "Text.", 0, 5)], ident, lambda d: "docref_x")
    assert c.title == "docref_x" and c.doc == "docref_x"
    assert "salaries-ada.md" not in repr(c.to_json()) and "doc_1" not in repr(c.to_json())
