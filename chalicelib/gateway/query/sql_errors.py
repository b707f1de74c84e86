"""What a caller may learn from a failed query: DuckDB's error turned into one safe sentence.

DuckDB's messages can carry internals: a Python traceback with file paths (a table function that needs
a missing module, such as ``test_all_types()``), suggestions of names the caller never typed ("Did you
mean sqlite_master?", "Candidate bindings: ..."), and the engine's configuration. Only the first line
of the message is kept, suggestions are cut, and a message that still looks internal (a path, a
traceback, a module, a setting) is replaced by a fixed sentence for its error class.
"""
from __future__ import annotations

import re

MAX_CHARS = 300

# the error classes a caller can cause, with the sentence used when the engine's own text is unsafe
_GENERIC = {
    "ParserException": "The SQL could not be parsed.",
    "CatalogException": "The query names a table or function that does not exist or may not be read.",
    "BinderException": "The query names a column or function that does not exist here.",
    "ConversionException": "A value could not be converted to the requested type.",
    "OutOfRangeException": "A value is out of range.",
    "InvalidInputException": "The query uses a function or input that is not available.",
    "PermissionException": "Queries can read only the workspace's datasets: files, network and settings are off.",
    "NotImplementedException": "The query uses a feature that is not supported.",
    "TypeMismatchException": "The query mixes incompatible types.",
    "DivideByZeroException": "The query divides by zero.",
    "OutOfMemoryException": "The query needs more memory than a query may use.",
    "SerializationException": "The query could not be run.",
}
_DEFAULT = "The query could not be run."
_SUGGESTION = re.compile(r"\s*(Did you mean|Candidate (bindings|functions)|Candidates?:|LINE \d+:).*$", re.I | re.S)
_INTERNAL = re.compile(
    r"Traceback|File \"|\.py\b|(^|[\s'\"(=])/[\w.-]+/|[A-Za-z]:\\|module|pytz|extension|httpfs|"
    r"setting|configuration|PRAGMA|sqlite_|duckdb_|pg_catalog|information_schema|temp_directory|"
    r"home_directory|memory_limit",
    re.I)


def public_message(err: BaseException) -> str:
    """One sentence about ``err`` that names nothing internal (see the module docstring)."""
    kind = type(err).__name__
    text = str(err).strip().split("\n", 1)[0]
    text = _SUGGESTION.sub("", text).strip()
    text = re.sub(r"^[A-Za-z ]+Error:\s*", "", text)  # "Catalog Error: ..." -> "..."
    if not text or _INTERNAL.search(text):
        return _GENERIC.get(kind, _DEFAULT)
    return text[:MAX_CHARS]
