"""Text of an uploaded document, page by page, or one clear reason why it cannot be read.

Supported: PDF (``pypdf``, one page per PDF page, numbered from 1), Word ``.docx`` (``python-docx``:
paragraphs and table cells), HTML (``html2text``: the visible text as Markdown-like lines), Markdown and
plain text (UTF-8). Checks run before any parser, on the bytes themselves:

- 0 bytes, over ``MAX_BYTES``, an extension outside ``EXTENSIONS``;
- content that does not match the extension (a PDF named ``.txt``, a ZIP named ``.pdf``, ...), named with
  what the content looks like;
- an encrypted PDF (a user password), a password-protected or legacy Word file (an OLE container);
- a ZIP whose members unpack to more than ``Bounds.max_content_bytes``, whose XML parts expand more than
  ``MAX_XML_RATIO`` times, or any member more than ``MAX_RATIO`` times (a zip bomb), checked from the
  central directory before anything is decompressed.

Then, with the parser (run only in the sync worker's bounded child, ``bounded_parser.py``):

- a PDF of more than ``Bounds.max_pages`` pages, or whose pages' content streams decompress to more
  than ``Bounds.max_content_bytes`` in all (a stream shared by many pages counts once per page: each
  page's extraction interprets it again), refused before any text is extracted;
- a PDF that reaches one of pypdf's own limits (``LimitReachedError``: millions of operators in one
  stream, a stream that decompresses beyond the bound, ...);
- a PDF without a text layer (a scan): no page yields text;
- text longer than ``Bounds.max_text_chars``.

``extract`` either returns every page or raises ``Unreadable``: a document is never half read, and any
failure of a parser on a file is one of these (the same file always fails the same way: never retried).
The message is written for the person who uploaded the file and says what to do.
"""
from __future__ import annotations

import io
import os
import zipfile
from dataclasses import dataclass
from typing import Any

from chalicelib.core.config import settings

MAX_BYTES = 50 * 1024 * 1024
MAX_RATIO = 200  # unpacked / packed size of a ZIP member beyond which it is taken for a zip bomb
MAX_XML_RATIO = 100  # the same for the XML parts (real Word XML packs 5 to 40 times)
RATIO_FREE_BYTES = 256 * 1024  # members this small are never judged by their ratio
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
class Bounds:
    """How much one document may cost to read. Defaults suit the workers function (512 MB, 300 s); each can
    be set in the environment (``DOCUMENT_PARSE_CPU_SECONDS``, ``DOCUMENT_PARSE_MEMORY_MB``,
    ``DOCUMENT_MAX_PAGES``, ``DOCUMENT_MAX_CONTENT_MB``, ``DOCUMENT_MAX_TEXT_CHARS``)."""

    cpu_seconds: int = 15  # CPU time of the parse (the child's RLIMIT_CPU)
    memory_mb: int = 320  # the child's address space (RLIMIT_AS), interpreter included
    max_pages: int = 5000
    max_content_bytes: int = 64 * 1024 * 1024  # decompressed: PDF page content (summed per page), Word parts
    max_text_chars: int = 20_000_000

    @classmethod
    def from_env(cls) -> Bounds:
        given = dict(settings().document_limits)

        def number(name: str, default: int) -> int:
            raw = given.get(name, "")
            return int(raw) if raw.strip().isdigit() and int(raw) > 0 else default

        d = cls()
        return cls(cpu_seconds=number("DOCUMENT_PARSE_CPU_SECONDS", d.cpu_seconds),
                   memory_mb=number("DOCUMENT_PARSE_MEMORY_MB", d.memory_mb),
                   max_pages=number("DOCUMENT_MAX_PAGES", d.max_pages),
                   max_content_bytes=number("DOCUMENT_MAX_CONTENT_MB", d.max_content_bytes >> 20) << 20,
                   max_text_chars=number("DOCUMENT_MAX_TEXT_CHARS", d.max_text_chars))


DEFAULT_BOUNDS = Bounds()


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


def check(file_name: str, data: bytes, max_bytes: int = MAX_BYTES, bounds: Bounds = DEFAULT_BOUNDS) -> str:
    """The document's kind (``pdf``, ``docx``, ``html``, ``text``) after the checks that need no parser
    (a Word file's ZIP central directory is read, nothing is decompressed): cheap enough for the upload
    route and the sync worker's own process."""
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
        _check_zip(file_name, data, bounds)
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


def _too_complex(file_name: str, what: str) -> Unreadable:
    return Unreadable("too_complex", f"{file_name} {what}: it was not read. Print it to a new PDF (or save "
                                     "it again) and upload that, or split it into smaller files.")


def _content_bytes(reader: Any, file_name: str, bounds: Bounds) -> None:
    """Refuse a PDF whose pages' content streams decompress to more than the bound, summed page by page
    (each stream decompressed once, however many pages draw it)."""
    from pypdf.generic import IndirectObject  # noqa: PLC0415

    sizes: dict[Any, int] = {}
    total = 0
    for page in reader.pages:
        contents = page.raw_get("/Contents") if "/Contents" in page else None
        if contents is None:
            continue
        resolved = contents.get_object() if isinstance(contents, IndirectObject) else contents
        parts = list(resolved) if isinstance(resolved, list) else [contents]
        for part in parts:
            key = (part.idnum, part.generation) if isinstance(part, IndirectObject) else id(part)
            if key not in sizes:
                stream = part.get_object()
                sizes[key] = len(stream.get_data()) if hasattr(stream, "get_data") else 0
            total += sizes[key]
            if total > bounds.max_content_bytes:
                raise _too_complex(file_name, f"draws more than {bounds.max_content_bytes >> 20} MiB of page "
                                              "content (many pages repeating the same content?)")


def _pdf(file_name: str, data: bytes, bounds: Bounds = DEFAULT_BOUNDS) -> list[Page]:
    from pypdf import PdfReader, apply_configuration  # noqa: PLC0415 - loaded by the sync worker only when a PDF comes
    from pypdf.errors import LimitReachedError  # noqa: PLC0415

    limit = bounds.max_content_bytes
    try:
        with apply_configuration(zlib_maximum_output_length=limit, lzw_maximum_output_length=limit,
                                 run_length_maximum_output_length=limit, array_based_stream_maximum_output_length=limit,
                                 maximum_declared_stream_length=limit):
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted and not reader.decrypt(""):  # an owner-only password still opens
                raise Unreadable("encrypted", f"{file_name} is password-protected: save a copy without the "
                                              "password and upload that.")
            if len(reader.pages) > bounds.max_pages:
                raise Unreadable("too_many_pages", f"{file_name} has {len(reader.pages)} pages; the limit is "
                                                   f"{bounds.max_pages}. Split it into smaller files.")
            _content_bytes(reader, file_name, bounds)
            pages = []
            chars = 0
            for n, page in enumerate(reader.pages, start=1):
                pages.append(Page(n, (page.extract_text() or "").strip()))
                chars += len(pages[-1].text)
                if chars > bounds.max_text_chars:
                    raise _too_much_text(file_name, bounds)
    except (Unreadable, MemoryError):
        raise
    except LimitReachedError:
        raise _too_complex(file_name, "is built in a way that goes beyond what a document may cost to read") from None
    except Exception as err:  # noqa: BLE001 - whatever a parser raises on a file, the same file raises again
        if "decrypt" in str(err).lower() or "encrypt" in str(err).lower():
            raise Unreadable("encrypted", f"{file_name} is password-protected: save a copy without the "
                                          "password and upload that.") from None
        raise Unreadable("damaged", f"{file_name} could not be read as a PDF (it may be damaged): "
                                    "open and save it again, then upload it.") from None
    if not any(p.text for p in pages):
        raise Unreadable("no_text_layer", f"{file_name} has no text layer (a scanned document?): run text "
                                          "recognition (OCR) on it and upload the result.")
    return [p for p in pages if p.text]


def _too_much_text(file_name: str, bounds: Bounds) -> Unreadable:
    return Unreadable("too_much_text", f"{file_name} holds more than {bounds.max_text_chars:,} characters of text: "
                                       "split it into smaller files.")


def _check_zip(file_name: str, data: bytes, bounds: Bounds = DEFAULT_BOUNDS) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError, EOFError):
        raise Unreadable("damaged", f"{file_name} could not be opened (the archive is damaged): "
                                    "open and save it again in Word, then upload it.") from None
    total = sum(i.file_size for i in infos)

    def expands(i: zipfile.ZipInfo) -> bool:
        ratio = MAX_XML_RATIO if i.filename.lower().endswith((".xml", ".rels")) else MAX_RATIO
        return i.file_size > RATIO_FREE_BYTES and i.file_size > ratio * max(i.compress_size, 1)

    if len(infos) > MAX_ZIP_MEMBERS or total > bounds.max_content_bytes or any(expands(i) for i in infos):
        raise Unreadable("zip_bomb", f"{file_name} would unpack to {total / 1048576:.0f} MiB from "
                                     f"{len(data) / 1048576:.1f} MiB (a zip bomb?): it was not opened.")


def _docx(file_name: str, data: bytes, bounds: Bounds = DEFAULT_BOUNDS) -> list[Page]:
    _check_zip(file_name, data, bounds)
    import docx  # noqa: PLC0415 - python-docx, loaded when a Word file comes
    from docx.opc.exceptions import PackageNotFoundError  # noqa: PLC0415

    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile, OSError) as err:
        raise Unreadable("damaged", f"{file_name} is not a Word document Word can open "
                                    f"({type(err).__name__}): open and save it again, then upload it.") from None
    except MemoryError:
        raise
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


def extract(file_name: str, data: bytes, max_bytes: int = MAX_BYTES, bounds: Bounds = DEFAULT_BOUNDS) -> list[Page]:
    """Every page of the document with its text (pages without text left out), or ``Unreadable``. The parse
    itself is only bounded in size here: the sync worker calls it in a child process that bounds CPU time
    and memory too (``bounded_parser``)."""
    kind = check(file_name, data, max_bytes, bounds)
    if kind == "pdf":
        pages = _pdf(file_name, data, bounds)
    elif kind == "docx":
        pages = _docx(file_name, data, bounds)
    elif kind == "html":
        pages = _html(file_name, data)
    else:
        pages = [Page(None, _decode(file_name, data))]
    if not any(p.text.strip() for p in pages):
        raise _no_text(file_name)
    if sum(len(p.text) for p in pages) > bounds.max_text_chars:
        raise _too_much_text(file_name, bounds)
    return pages
