"""Text of an uploaded document, page by page, or one clear reason why it cannot be read.

Supported: PDF (``pypdf``, one page per PDF page, numbered from 1), Word ``.docx`` (``python-docx``:
paragraphs and table cells), HTML (``html2text``: the visible text as Markdown-like lines), Markdown and
plain text (UTF-8). Checks run before any parser, on the bytes themselves:

- 0 bytes, over ``MAX_BYTES``, an extension outside ``EXTENSIONS``;
- content that does not match the extension (a PDF named ``.txt``, a ZIP named ``.pdf``, ...), named with
  what the content looks like;
- an encrypted PDF (a user password), a password-protected or legacy Word file (an OLE container);
- a ZIP whose members unpack to more than ``MAX_UNPACKED_BYTES`` or at a ratio over ``MAX_RATIO``
  (a zip bomb), checked from the central directory before anything is decompressed;
- a PDF without a text layer (a scan): no page yields text.

``extract`` either returns every page or raises ``Unreadable``: a document is never half read. The
message is written for the person who uploaded the file and says what to do.
"""
from __future__ import annotations

import io
import os
import zipfile
from dataclasses import dataclass

MAX_BYTES = 50 * 1024 * 1024
MAX_PAGES = 5000
MAX_UNPACKED_BYTES = 200 * 1024 * 1024
MAX_RATIO = 200  # unpacked / packed size of a ZIP member beyond which it is taken for a zip bomb
MAX_ZIP_MEMBERS = 10_000
TEXT_EXTENSIONS = (".txt", ".md", ".markdown", ".csv", ".json", ".log")
HTML_EXTENSIONS = (".html", ".htm")
EXTENSIONS = (".pdf", ".docx", *HTML_EXTENSIONS, *TEXT_EXTENSIONS)
SUPPORTED_WORDS = "PDF, Word (.docx), HTML, Markdown or plain text (.txt)"
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


class Unreadable(Exception):
    """The document cannot be indexed: ``code`` for programs, the message for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Page:
    number: int | None  # the PDF page (1-based); None for formats without pages
    text: str


def extension(file_name: str) -> str:
    return os.path.splitext(file_name.lower())[1]


def _looks_like(data: bytes) -> str | None:
    """What the bytes are, from their first bytes: ``pdf``, ``zip``, ``ole`` or None (text or unknown)."""
    head = data[:1024]
    if b"%PDF-" in head[:32]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if head.startswith(_OLE_MAGIC):
        return "ole"
    return None


_WHAT = {"pdf": "a PDF", "zip": "a ZIP archive (such as a Word .docx file)", "ole": "an Office file in the old format"}


def check(file_name: str, data: bytes, max_bytes: int = MAX_BYTES) -> str:
    """The document's kind (``pdf``, ``docx``, ``html``, ``text``) after the checks that need no parser."""
    ext = extension(file_name)
    if ext not in EXTENSIONS:
        shown = ext or "no extension"
        raise Unreadable("unsupported_type", f"{file_name}: {shown} files are not supported. "
                                             f"Upload {SUPPORTED_WORDS}.")
    if not data:
        raise Unreadable("empty_file", f"{file_name} is empty (0 bytes): nothing to index.")
    if len(data) > max_bytes:
        raise Unreadable("too_large", f"{file_name} is {len(data) / 1048576:.1f} MiB; the limit is "
                                      f"{max_bytes / 1048576:.0f} MiB. Split it into smaller files.")
    looks = _looks_like(data)
    if ext == ".docx" and looks == "ole":
        raise Unreadable("encrypted", f"{file_name} is password-protected or in the old Word format: "
                                      "open it in Word, remove the password and save it as .docx.")
    want = {".pdf": "pdf", ".docx": "zip"}.get(ext)
    if looks != want:
        if looks is not None:
            raise Unreadable("wrong_extension", f"{file_name} is named {ext} but holds {_WHAT[looks]}: "
                                                "rename it with the right extension and upload it again.")
        raise Unreadable("wrong_extension", f"{file_name} is named {ext} but is not a {ext[1:].upper()} file "
                                            "(its content does not match): check the file and upload it again.")
    if ext == ".pdf":
        return "pdf"
    if ext == ".docx":
        return "docx"
    return "html" if ext in HTML_EXTENSIONS else "text"


def _decode(file_name: str, data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Unreadable("not_utf8", f"{file_name} is not UTF-8 text: save it as UTF-8 and upload it "
                                     "again.") from None
    if "\x00" in text:
        raise Unreadable("binary_content", f"{file_name} holds binary data, not text.")
    return text


def _no_text(file_name: str) -> Unreadable:
    return Unreadable("no_text", f"{file_name} contains no text to index.")


def _pdf(file_name: str, data: bytes) -> list[Page]:
    from pypdf import PdfReader  # noqa: PLC0415 - loaded by the sync worker only when a PDF comes
    from pypdf.errors import PdfReadError  # noqa: PLC0415

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):  # an owner-only password still opens
            raise Unreadable("encrypted", f"{file_name} is password-protected: save a copy without the "
                                          "password and upload that.")
        if len(reader.pages) > MAX_PAGES:
            raise Unreadable("too_many_pages", f"{file_name} has {len(reader.pages)} pages; the limit is "
                                               f"{MAX_PAGES}. Split it into smaller files.")
        pages = [Page(n, (page.extract_text() or "").strip()) for n, page in enumerate(reader.pages, start=1)]
    except Unreadable:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as err:
        if "decrypt" in str(err).lower() or "encrypt" in str(err).lower():
            raise Unreadable("encrypted", f"{file_name} is password-protected: save a copy without the "
                                          "password and upload that.") from None
        raise Unreadable("damaged", f"{file_name} could not be read as a PDF (it may be damaged): "
                                    "open and save it again, then upload it.") from None
    if not any(p.text for p in pages):
        raise Unreadable("no_text_layer", f"{file_name} has no text layer (a scanned document?): run text "
                                          "recognition (OCR) on it and upload the result.")
    return [p for p in pages if p.text]


def _check_zip(file_name: str, data: bytes) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError):
        raise Unreadable("damaged", f"{file_name} could not be opened (the archive is damaged): "
                                    "open and save it again in Word, then upload it.") from None
    total = sum(i.file_size for i in infos)
    bomb = len(infos) > MAX_ZIP_MEMBERS or total > MAX_UNPACKED_BYTES or any(
        i.file_size > 1024 * 1024 and i.file_size > MAX_RATIO * max(i.compress_size, 1) for i in infos)
    if bomb:
        raise Unreadable("zip_bomb", f"{file_name} would unpack to {total / 1048576:.0f} MiB from "
                                     f"{len(data) / 1048576:.1f} MiB (a zip bomb?): it was not opened.")


def _docx(file_name: str, data: bytes) -> list[Page]:
    _check_zip(file_name, data)
    import docx  # noqa: PLC0415 - python-docx, loaded when a Word file comes
    from docx.opc.exceptions import PackageNotFoundError  # noqa: PLC0415

    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile, OSError) as err:
        raise Unreadable("damaged", f"{file_name} is not a Word document Word can open "
                                    f"({type(err).__name__}): open and save it again, then upload it.") from None
    except Exception:  # noqa: BLE001 - lxml's errors for malformed XML parts
        raise Unreadable("damaged", f"{file_name} is not a Word document Word can open: open and save it "
                                    "again, then upload it.") from None
    blocks = [p.text.strip() for p in document.paragraphs]
    for table in document.tables:
        for row in table.rows:
            cells = [c.text.strip() for c in row.cells]
            blocks.append(" | ".join(c for c in cells if c))
    text = "\n\n".join(b for b in blocks if b)
    return [Page(None, text)]


def _html(file_name: str, data: bytes) -> list[Page]:
    import html2text  # noqa: PLC0415

    converter = html2text.HTML2Text()
    converter.ignore_images = True
    converter.ignore_links = True
    converter.body_width = 0
    return [Page(None, converter.handle(_decode(file_name, data)).strip())]


def extract(file_name: str, data: bytes, max_bytes: int = MAX_BYTES) -> list[Page]:
    """Every page of the document with its text (pages without text left out), or ``Unreadable``."""
    kind = check(file_name, data, max_bytes)
    if kind == "pdf":
        pages = _pdf(file_name, data)
    elif kind == "docx":
        pages = _docx(file_name, data)
    elif kind == "html":
        pages = _html(file_name, data)
    else:
        pages = [Page(None, _decode(file_name, data))]
    if not any(p.text.strip() for p in pages):
        raise _no_text(file_name)
    return pages
