"""The bounded document reader: each bound stops its own kind of hostile file, the child that a file
stopped is replaced for the next one, and the child holds no credentials. (The CPU bound is exercised
through the sync worker: tests/functional/gateway/test_document_uploads.py.)"""
from __future__ import annotations

import os
from typing import Any

import pytest

from chalicelib.core.config import settings
from chalicelib.gateway.ingest.sources import bounded_parser, document_text
from chalicelib.gateway.ingest.sources.bounded_parser import BoundedParser
from chalicelib.gateway.ingest.sources.document_text import Bounds, Unreadable
from tests.fixtures import documents

GOOD = documents.pdf(["Orders ship within two days."])


def _refused(parser: BoundedParser, name: str, data: bytes) -> Unreadable:
    with pytest.raises(Unreadable) as err:
        parser.extract(name, data)
    return err.value


def test_memory_bound_answers_by_name_and_the_next_file_still_reads() -> None:
    with BoundedParser(Bounds(memory_mb=160, max_content_bytes=128 << 20)) as parser:
        err = _refused(parser, "inflates.pdf", documents.inflating_pdf(100))
        assert err.code in ("too_much_memory", "damaged"), err.message  # malloc may fail inside C code too
        assert err.message.startswith("inflates.pdf ")
        assert parser.extract("good.pdf", GOOD)[0].number == 1
        assert parser.children_started == 2


def test_content_and_page_bounds_refuse_before_any_text_is_extracted() -> None:
    with BoundedParser(Bounds(max_content_bytes=8 << 20, max_pages=500)) as parser:
        err = _refused(parser, "pages.pdf", documents.shared_stream_pdf(levels=2, fanout=10, operators=20_000))
        assert err.code == "too_complex" and "page content" in err.message
        assert _refused(parser, "many.pdf", documents.shared_stream_pdf(levels=3, operators=10)).code == "too_many_pages"
        assert parser.children_started == 1  # refusals, not crashes: one child for all


def test_pypdf_limit_is_an_unreadable_file_not_an_error() -> None:
    """pypdf's own limits (here its operator budget per stream, lowered) raise ``LimitReachedError``: the
    file is skipped by name like any unreadable one, never a failed sync."""
    from pypdf import apply_configuration

    with apply_configuration(stream_parsing_work_maximum_count=1000), pytest.raises(Unreadable) as err:
        document_text.extract("tokens.pdf", documents.operator_flood_pdf(10_000))
    assert err.value.code == "too_complex" and err.value.message.startswith("tokens.pdf ")


def test_word_xml_that_expands_150_times_is_refused_from_the_directory_alone(monkeypatch: Any) -> None:
    data = documents.expanding_docx(8, ratio=150)
    assert len(data) < 100_000
    monkeypatch.setattr(bounded_parser.BoundedParser, "_ask", lambda *a: pytest.fail("the child was asked"))
    err = _refused(BoundedParser(), "expands.docx", data)
    assert err.code == "zip_bomb"
    assert document_text.extract("plain.docx", documents.docx(["A normal Word file."]))[0].text == "A normal Word file."


def test_the_child_gets_no_credentials(monkeypatch: Any) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    env = bounded_parser._child_env()
    assert set(env) == {"PATH", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "LANG", "PYTHONHASHSEED"}
    assert os.getcwd() in env["PYTHONPATH"].split(os.pathsep) or any(
        os.path.isdir(os.path.join(p, "chalicelib")) for p in env["PYTHONPATH"].split(os.pathsep))


def test_bounds_from_the_environment(monkeypatch: Any) -> None:
    monkeypatch.setenv("DOCUMENT_PARSE_CPU_SECONDS", "3")
    monkeypatch.setenv("DOCUMENT_MAX_CONTENT_MB", "8")
    monkeypatch.setenv("DOCUMENT_MAX_PAGES", "nonsense")
    settings.cache_clear()  # settings are read once from the environment
    b = Bounds.from_env()
    assert (b.cpu_seconds, b.max_content_bytes, b.max_pages) == (3, 8 << 20, Bounds().max_pages)


def test_a_reader_that_cannot_start_fails_the_sync_for_a_retry_not_the_file(monkeypatch: Any) -> None:
    """Only a file's own failure skips it for good; a child that exits by itself (here: it cannot import its
    module) is the worker's trouble: a ``SourceError`` (not permanent), so the sync is retried."""
    from chalicelib.gateway.ingest.sources import SourceError

    monkeypatch.setattr(bounded_parser, "_MODULE", "chalicelib.no_such_module")
    with BoundedParser() as parser, pytest.raises(SourceError) as err:
        parser.extract("good.pdf", GOOD)
    assert not err.value.permanent and "before reading good.pdf" in str(err.value)
