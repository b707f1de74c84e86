"""The one password rule (NIST SP 800-63B, section 3.1.1.2): every surface that sets a password checks it
here and every page that asks for one shows ``RULE_TEXT`` and ``MIN_LENGTH`` from here.

- At least ``MIN_LENGTH`` (12) and at most ``MAX_LENGTH`` (256) characters, counted as Unicode code points
  after NFKC normalisation; spaces and every printable character are allowed; no composition rules
  (no "one digit, one symbol"), no expiry.
- Refused: a password on the blocklist (the 30,000 most common passwords that ``zxcvbn`` ships, compared
  case-insensitively, without spaces and without a trailing run of digits or symbols), one character repeated, and one that contains
  the user's e-mail name or the service's name.

Password sign-in always asks for a second factor here, so 12 is above 800-63B's minimum of 8 for a
password used with another factor; 256 is well above its required maximum of at least 64.
"""
from __future__ import annotations

import re
import unicodedata

from chalicelib.core.process_state import cached

MIN_LENGTH = 12
MAX_LENGTH = 256
SERVICE_WORDS = ("aiplatform", "ai platform")
RULE_TEXT = (f"Use at least {MIN_LENGTH} characters (at most {MAX_LENGTH}). Spaces, any letters and symbols are "
             "allowed and nothing else is required: a few unrelated words make a good password. Common "
             "passwords and ones containing your e-mail name are refused.")


@cached(maxsize=1, derived=True)
def _blocklist() -> frozenset[str]:
    from zxcvbn.frequency_lists import FREQUENCY_LISTS  # noqa: PLC0415 - the frequency lists load at first use (megabytes), not at cold start
    return frozenset(FREQUENCY_LISTS["passwords"])


def normalise(password: str) -> str:
    """NFKC, as 800-63B asks before hashing and length counting."""
    return unicodedata.normalize("NFKC", password)


def problem(password: object, *, email: str | None = None) -> str | None:
    """Why ``password`` is refused (a sentence fragment for a field error), or None when it is allowed."""
    if not isinstance(password, str):
        return "must be a string"
    pw = normalise(password)
    if len(pw) < MIN_LENGTH:
        return f"must have at least {MIN_LENGTH} characters"
    if len(pw) > MAX_LENGTH:
        return f"must have at most {MAX_LENGTH} characters"
    if not pw.strip():
        return "must not be blank"
    folded = pw.strip().casefold()
    if len(set(folded)) == 1:
        return "must not be one character repeated"
    stem = re.sub(r"[\d\W_]+$", "", folded)  # "iloveyou2024!" is "iloveyou" with a suffix
    if {folded, folded.replace(" ", ""), stem} & _blocklist():
        return "is too common: it is on the list of frequently used passwords"
    local = (email or "").split("@")[0].casefold()
    if len(local) >= 4 and local in folded:
        return "must not contain your e-mail name"
    if any(word in folded for word in SERVICE_WORDS):
        return "must not contain the service's name"
    return None


def describe() -> dict[str, object]:
    """The rule for clients and pages: ``{min_length, max_length, text}``."""
    return {"min_length": MIN_LENGTH, "max_length": MAX_LENGTH, "text": RULE_TEXT}
