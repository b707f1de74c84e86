"""Field policies turned into values: ALLOW, MASK, HASH, REDACT, DENY.

- ``MASK``: the value as text with every character but the last four replaced by ``*``; values of
  four characters or fewer are masked whole (otherwise they would come back unchanged).
- ``HASH``: hex HMAC-SHA256 of the value's UTF-8 text under the workspace's hash key, so equal values
  hash equally within a workspace (joins and counts still work) and differ across workspaces.
  The key is derived, never stored: ``KMS GenerateMac(HMAC_256 key "field-hash" of the workspace's
  region, "aiplat/field-hash/v1/<workspace_id>")``. The root secret never leaves KMS; the derived key
  is cached per process.
- ``REDACT``: null (the column keeps its type). ``DENY``: the column is not loaded at all.

Policies become SQL projections applied while a dataset is loaded into a query connection, so the
caller's SQL only ever sees transformed values.
"""
from __future__ import annotations

import hashlib
import hmac

from chalicelib.core import aws
from chalicelib.core.process_state import cached

HASH_CONTEXT = "aiplat/field-hash/v1/"
_BLOCK = 64  # SHA-256 block size


@cached(maxsize=1024)
def workspace_hash_key(region: str, workspace_id: str) -> bytes:
    """The workspace's 32-byte HMAC key, derived in KMS from the region's field-hash key."""
    out = aws.client("kms", region).generate_mac(
        KeyId=aws.key_alias("field-hash"), MacAlgorithm="HMAC_SHA_256",
        Message=(HASH_CONTEXT + workspace_id).encode())
    return bytes(out["Mac"])


def hash_text(key: bytes, value: str) -> str:
    """The ``HASH`` policy of one value, computed in Python (same result as the SQL projection)."""
    return hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()


def mask_text(value: str) -> str:
    """The ``MASK`` policy of one value: keep the last four characters."""
    if len(value) <= 4:
        return "*" * len(value)
    return "*" * (len(value) - 4) + value[-4:]


def hmac_pads(key: bytes) -> tuple[bytes, bytes]:
    """HMAC inner and outer pads (RFC 2104) for computing HMAC-SHA256 with DuckDB's ``sha256``."""
    k = key if len(key) <= _BLOCK else hashlib.sha256(key).digest()
    k = k.ljust(_BLOCK, b"\0")
    return bytes(b ^ 0x36 for b in k), bytes(b ^ 0x5C for b in k)


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def projection(column: str, policy: str, present: bool) -> str | None:
    """The SQL select item producing ``column`` under ``policy`` (None: the column is left out).

    HASH items refer to the named parameters ``$ipad`` and ``$opad`` (see ``hmac_pads``).
    A column missing from every Parquet part (a field added later) loads as nulls.
    """
    q = quote_ident(column)
    if policy == "DENY":
        return None
    if not present:
        return f"CAST(NULL AS VARCHAR) AS {q}"
    text = f"CAST({q} AS VARCHAR)"
    if policy == "ALLOW":
        return f"{q} AS {q}"
    if policy == "REDACT":
        return f"(CASE WHEN false THEN {q} END) AS {q}"
    if policy == "MASK":
        return (f"(CASE WHEN {q} IS NULL THEN NULL WHEN length({text}) > 4 "
                f"THEN repeat('*', length({text}) - 4) || right({text}, 4) "
                f"ELSE repeat('*', length({text})) END) AS {q}")
    if policy == "HASH":
        return (f"(CASE WHEN {q} IS NULL THEN NULL ELSE "
                f"sha256($opad::BLOB || unhex(sha256($ipad::BLOB || encode({text})))) END) AS {q}")
    return None  # unknown policy: fail closed
