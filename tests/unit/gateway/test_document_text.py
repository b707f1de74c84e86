"""Uploaded documents: the text of each supported format (page numbers for PDFs), and one clear reason for
every file that cannot be indexed, without half a document."""
from __future__ import annotations

import pytest

from chalicelib.gateway.ingest.sources import document_text
from chalicelib.gateway.ingest.sources.documents import document_records
from tests.fixtures import documents


def _refused(name: str, data: bytes, **kw: int) -> document_text.Unreadable:
    with pytest.raises(document_text.Unreadable) as err:
        document_text.extract(name, data, **kw)
    assert name in err.value.message
    return err.value


def test_pdf_text_page_by_page() -> None:
    pages = document_text.extract("terms.pdf", documents.pdf(["Returns within 30 days.", "", "Shipping is free."]))
    assert [(p.number, p.text) for p in pages] == [(1, "Returns within 30 days."), (3, "Shipping is free.")]


def test_pdf_passages_keep_their_page_and_span() -> None:
    pages = document_text.extract("terms.pdf", documents.pdf(["Alpha page.", "Beta page."]))
    rows = document_records("doc_1", "terms.pdf", "k", "2026-01-01 00:00:00", pages, 1000, 100)
    assert [(r.values["page"], r.values["text"]) for r in rows] == [(1, "Alpha page."), (2, "Beta page.")]
    whole = "\n\n".join(p.text for p in pages)
    assert all(whole[r.values["char_start"]:r.values["char_end"]] == r.values["text"] for r in rows)


def test_docx_paragraphs_and_tables() -> None:
    data = documents.docx(["Leave policy", "Twenty days a year."], [["Grade", "Days"], ["A", "25"]])
    [page] = document_text.extract("policy.docx", data)
    assert page.number is None
    assert page.text == "Leave policy\n\nTwenty days a year.\n\nGrade | Days\n\nA | 25"


def test_html_visible_text_only() -> None:
    html = b"<html><head><script>steal()</script><style>p{}</style></head><body><h1>Title</h1><p>Body</p></body>"
    [page] = document_text.extract("page.html", html)
    assert "Title" in page.text and "Body" in page.text
    assert "steal" not in page.text and "p{}" not in page.text


def test_markdown_and_text() -> None:
    assert document_text.extract("a.md", "# Héllo\n\nworld".encode())[0].text == "# Héllo\n\nworld"
    assert document_text.extract("a.txt", b"\xef\xbb\xbfplain")[0].text == "plain"


@pytest.mark.parametrize(("name", "data", "code", "words"), [
    ("scan.pdf", documents.scanned_pdf(), "no_text_layer", "no text layer"),
    ("locked.pdf", documents.encrypted_pdf(), "encrypted", "password-protected"),
    ("bomb.docx", documents.zip_bomb(250), "zip_bomb", "zip bomb"),
    ("empty.pdf", b"", "empty_file", "0 bytes"),
    ("report.txt", documents.pdf(["x"]), "wrong_extension", "holds a PDF"),
    ("report.pdf", b"just some text", "wrong_extension", "not a PDF"),
    ("report.pdf", documents.docx(["x"]), "wrong_extension", "ZIP archive"),
    ("old.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, "encrypted", "old Word format"),
    ("tool.exe", b"MZ\x90\x00", "unsupported_type", ".exe files are not supported"),
    ("noext", b"text", "unsupported_type", "no extension"),
    ("latin1.txt", "café".encode("latin-1"), "not_utf8", "not UTF-8"),
    ("blank.md", b"   \n\n ", "no_text", "no text"),
    ("broken.pdf", b"%PDF-1.7\n" + b"garbage" * 50, "damaged", "could not be read"),
    ("broken.docx", b"PK\x03\x04" + b"garbage" * 50, "damaged", "damaged"),
])
def test_each_unreadable_file_says_why(name: str, data: bytes, code: str, words: str) -> None:
    err = _refused(name, data)
    assert err.code == code
    assert words in err.message


def test_oversized_named_with_the_limit() -> None:
    err = _refused("big.txt", b"a" * 2048, max_bytes=1024)
    assert err.code == "too_large"
    assert "the limit is" in err.message
