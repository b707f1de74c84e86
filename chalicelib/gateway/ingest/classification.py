"""Column classification at ingestion: PII, CONFIDENTIAL or INTERNAL, from the column's normalised name
and from its sampled values.

- Names are folded to ASCII (``Prénom`` -> ``prenom``), split on camelCase and punctuation, and matched
  by whole tokens, so ``Full Name``, ``fullName`` and ``full_name`` agree and ``filename`` is not a name.
- Values are checked by maintained validators, not loose patterns: phone numbers by ``phonenumbers``
  (Google's libphonenumber metadata), IBANs, US SSNs and card numbers by ``python-stdnum`` checksums,
  IP addresses by ``ipaddress``, person names by the given-name and surname lists ``zxcvbn`` ships.
  Dates, times, amounts and plain numeric ids are ruled out before the phone check, so an ISO date
  column is not PII.
- A column is PII when at least 80% of its sampled non-empty string values are PII values, or when
  at least 30% of free-text values carry an e-mail address or a phone number.

The labelled column set ``tests/fixtures/gateway/pii_columns.jsonl`` measures precision and recall
(see ``docs/api/gateway.md``).
"""
from __future__ import annotations

import ipaddress
import re
import unicodedata
from typing import Any

from chalicelib.core.process_state import cached

VALUE_SHARE = 0.8  # share of sampled values that must be PII values
TEXT_SHARE = 0.3  # share of free-text values that must carry an e-mail address or phone number
MAX_SAMPLES = 200
MAX_TEXTS = 50  # free-text values searched for contact details (the slowest check)
TRUNK_REGIONS = ("GB", "FR", "DE")  # national numbers written with a leading 0 (trunk prefix)

# --- names -------------------------------------------------------------------------------------
_PII_TOKENS = frozenset({
    "email", "mail", "courriel", "correo", "phone", "mobile", "telephone", "tel", "fax", "cell", "cellphone",
    "telefon", "telefono", "handy", "ssn", "passport", "nino", "tin", "sin", "iban", "dob", "birthday",
    "birthdate", "surname", "lastname", "firstname", "fullname", "forename", "givenname", "username",
    "vorname", "nachname", "prenom", "nombre", "apellido", "apellidos", "cognome", "nome", "street",
    "postcode", "zip", "zipcode", "postal", "address", "adresse", "direccion", "indirizzo", "anschrift",
    "geburtsdatum", "birth", "plz", "ip", "ipv4", "ipv6", "ipaddress", "msisdn", "geburtstag", "strasse",
})
_PII_PAIRS = (("social", "security"), ("national", "id"), ("tax", "id"), ("date", "birth"),
              ("birth", "date"), ("card", "number"), ("credit", "card"), ("cc", "num"), ("account", "number"),
              ("bank", "account"), ("fecha", "nacimiento"), ("e", "mail"), ("driver", "license"),
              ("licence", "number"), ("license", "number"), ("mac", "address"))
_NAME_TOKENS = frozenset({"name", "names", "nom", "nome"})
# a "name" column about something other than a person
_THING_TOKENS = frozenset({
    "file", "filename", "product", "company", "business", "brand", "host", "hostname", "table", "column",
    "field", "domain", "project", "app", "application", "device", "item", "category", "city", "country",
    "region", "bank", "org", "organisation", "organization", "team", "department", "dept", "model", "event",
    "campaign", "plan", "tag", "store", "shop", "branch", "vendor", "supplier", "merchant", "service",
    "dataset", "bucket", "queue", "job", "task", "metric", "feature", "role", "group", "variant", "sku",
    "package", "library", "repo", "repository", "module", "schema",
    "server", "cluster", "zone", "warehouse", "site", "location", "venue", "course", "school",
    "university", "hospital", "ship", "vessel", "airport", "station", "color", "colour", "size", "currency",
    "language", "locale", "timezone", "tz", "stage", "status", "type", "kind", "key", "index",
})
# a column about a personal-data column, not holding one: ``email_verified``, ``phone_model``, ``server_ip``
_ABOUT_TOKENS = frozenset({
    "model", "brand", "type", "types", "verified", "domain", "length", "len", "count", "style", "format",
    "provider", "status", "template", "kind", "category", "flag", "has", "is", "valid", "bounced", "server",
    "host", "gateway", "router", "opt", "optin", "enabled", "consent", "country", "region", "hash", "file",
    "archive", "policy", "source",
})
_NOT_ADDRESS = frozenset({"web", "url", "site", "billing_url", "wallet", "contract", "ens"})
_CONFIDENTIAL = frozenset({"password", "passwd", "pwd", "secret", "token", "apikey", "salary", "income",
                           "revenue", "wage", "wages", "bonus", "compensation", "gehalt", "salaire"})


def name_tokens(name: str) -> list[str]:
    """``Prénom du client`` -> ``["prenom", "du", "client"]``; ``customerEMail`` -> ``["customer", "e", "mail"]``."""
    folded = str(name).replace("ß", "ss")
    folded = unicodedata.normalize("NFKD", folded).encode("ascii", "ignore").decode("ascii")
    folded = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", folded)
    folded = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", folded)
    return [t for t in re.split(r"[^a-z0-9]+", folded.lower()) if t]


def classify_name(name: str) -> str | None:
    """PII or CONFIDENTIAL from the column name alone, None when the name says nothing."""
    tokens = name_tokens(name)
    joined = "".join(tokens)
    pairs = set(zip(tokens, tokens[1:], strict=False))
    about = bool(_ABOUT_TOKENS & set(tokens))
    if any(t in _PII_TOKENS for t in tokens) or any(p in pairs for p in _PII_PAIRS):
        if about or ("address" in tokens and _NOT_ADDRESS & set(tokens)):
            return None
        return "PII"
    if joined in {"emailaddress", "phonenumber", "fullname", "firstname", "lastname", "apikey"}:
        return "PII" if joined != "apikey" else "CONFIDENTIAL"
    if _NAME_TOKENS & set(tokens) and not _THING_TOKENS & set(tokens) and not about:
        return "PII"
    if any(t in _CONFIDENTIAL for t in tokens) or ("api" in tokens and "key" in tokens):
        return "CONFIDENTIAL"
    return None


# --- values ------------------------------------------------------------------------------------
_EMAIL = re.compile(r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")
_EMAIL_IN_TEXT = re.compile(r"[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_PHONE_SHAPE = re.compile(r"^(?:\+|00)?[\d\s().\-/]{7,22}$")
_DATE_OR_TIME = re.compile(
    r"^\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?:[T ].*)?$|^\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}(?:[T ].*)?$|^\d{1,2}:\d{2}")
_NUMBERISH = re.compile(
    r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$|^[+-]?\d{1,3}(?:\.\d{3})+(?:,\d+)?$|^[+-]?\d+(?:[.,]\d+)?$")
_NANP = re.compile(r"^(?:\+?1[\s.-]?)?\(?\d{3}\)?[\s.-]?\d{3}[\s.-]\d{4}$")
_CARD_SHAPE = re.compile(r"^(?:\d[ -]?){12,18}\d$")
_WORD = re.compile(r"^[^\W\d_]+(?:['-][^\W\d_]+)*\.?$")


@cached(maxsize=1, derived=True)
def _person_names() -> tuple[frozenset[str], frozenset[str]]:
    """Given names and surnames from the lists ``zxcvbn`` ships (loaded on first use)."""
    from zxcvbn.frequency_lists import FREQUENCY_LISTS  # noqa: PLC0415 - the frequency lists load at first use (megabytes), not at cold start
    given = frozenset(FREQUENCY_LISTS["male_names"]) | frozenset(FREQUENCY_LISTS["female_names"])
    return given, frozenset(FREQUENCY_LISTS["surnames"])


def _fold(word: str) -> str:
    """ASCII, lower case, no apostrophes: ``O'Brien`` -> ``obrien``, ``Straße`` -> ``strasse``."""
    word = word.replace("ß", "ss").replace("ı", "i").replace("'", "").replace("’", "")
    return unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode("ascii").lower().strip(".")


def is_person_name(value: str) -> bool:
    """Two to four capitalised words, the first a known given name or the last a known surname
    (``Ana García``, ``Müller, Jürgen`` is handled by the comma order)."""
    value = value.strip()
    if "," in value:
        last, _, first = value.partition(",")
        value = f"{first.strip()} {last.strip()}"
    words = value.split()
    if not 2 <= len(words) <= 4 or not all(_WORD.match(w) and w[0].isupper() for w in words):
        return False
    given, surnames = _person_names()
    first, last = _fold(words[0]), _fold(words[-1])
    return first in given or last in surnames or (first in surnames and last in given)  # family name first


def is_phone(value: str) -> bool:
    """A valid phone number: with a country code in any region, or national in ``PHONE_REGIONS``."""
    v = value.strip()
    if not _PHONE_SHAPE.match(v) or _DATE_OR_TIME.match(v):
        return False
    if _NUMBERISH.match(v) and not re.fullmatch(r"\+\d{8,15}", v):  # +14155552671 is E.164, not an amount
        return False
    digits = re.sub(r"\D", "", v)
    if not 7 <= len(digits) <= 15:
        return False
    if v.startswith("00"):
        v = "+" + v[2:]
    if v.startswith("+"):
        regions: tuple[str | None, ...] = (None,)
    elif _NANP.match(v):
        regions = ("US",)  # (415) 555-2671, 415.555.2671
    elif v.startswith("0") and re.search(r"[\s().\-/]", v):
        regions = TRUNK_REGIONS  # 07700 900123, 06 12 34 56 78
    else:
        return False  # a bare or oddly grouped digit run is an id as often as a phone number
    import phonenumbers  # noqa: PLC0415 - loaded by the first sync that classifies, not at cold start

    for region in regions:
        try:
            if phonenumbers.is_valid_number(phonenumbers.parse(v, region)):
                return True
        except phonenumbers.NumberParseException:
            continue
    return False


def is_card(value: str) -> bool:
    v = value.strip()
    if not _CARD_SHAPE.match(v):
        return False
    digits = re.sub(r"\D", "", v)
    from stdnum import luhn  # noqa: PLC0415 - python-stdnum loads at the first classification, not at cold start

    return 13 <= len(digits) <= 19 and digits[0] in "3456" and luhn.is_valid(digits)


_PRIVATE_NETS = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"))


def is_ip(value: str) -> bool:
    try:
        ip = ipaddress.ip_address(value.strip())
    except ValueError:
        return False
    if ip.is_loopback or ip.is_unspecified or ip.is_link_local:
        return False
    return not any(ip.version == n.version and ip in n for n in _PRIVATE_NETS)  # private: a machine's address


def pii_kind(value: str) -> str | None:
    """What kind of personal data one value is (``email``, ``phone``, ``iban``, ...), or None."""
    v = value.strip()
    if not v or len(v) > 120:
        return None
    if _EMAIL.match(v):
        return "email"
    from stdnum import iban  # noqa: PLC0415 - python-stdnum loads at the first classification, not at cold start
    from stdnum.us import ssn  # noqa: PLC0415

    if iban.is_valid(v):
        return "iban"
    if re.fullmatch(r"\d{3}-\d{2}-\d{4}", v) and ssn.is_valid(v):
        return "ssn"
    if is_card(v):
        return "card"
    if is_ip(v):
        return "ip"
    if is_phone(v):
        return "phone"
    if is_person_name(v):
        return "person_name"
    return None


def _carries_contact(text: str) -> bool:
    if _EMAIL_IN_TEXT.search(text):
        return True
    import phonenumbers  # noqa: PLC0415

    for _ in phonenumbers.PhoneNumberMatcher(text, "US", leniency=phonenumbers.Leniency.VALID):
        return True
    return False


def classify_values(samples: list[Any]) -> str | None:
    """PII when the sampled string values are personal data (see the module docstring), else None."""
    strings = [s.strip() for s in samples if isinstance(s, str) and s.strip()][:MAX_SAMPLES]
    if not strings:
        return None
    if _share_reaches(strings, lambda v: pii_kind(v) is not None, VALUE_SHARE):
        return "PII"
    texts = [s for s in strings if len(s.split()) >= 4]
    if len(texts) >= 0.5 * len(strings) and _share_reaches(texts[:MAX_TEXTS], _carries_contact, TEXT_SHARE):
        return "PII"
    return None


def _share_reaches(values: list[str], test: Any, share: float) -> bool:
    """Whether at least ``share`` of ``values`` pass ``test``; stops as soon as the answer is known and
    tests each distinct value once."""
    allowed_misses = len(values) - share * len(values)
    seen: dict[str, bool] = {}
    misses = 0
    for v in values:
        if v not in seen:
            seen[v] = bool(test(v))
        if not seen[v]:
            misses += 1
            if misses > allowed_misses:
                return False
    return True


def classify(name: str, samples: list[Any]) -> str:
    """PII if the name or the values say so; CONFIDENTIAL for credential and pay columns; else INTERNAL."""
    by_name = classify_name(name)
    if by_name == "PII":
        return "PII"
    if classify_values(samples) == "PII":
        return "PII"
    return by_name or "INTERNAL"
