"""The revocation ledger, the side that records: every context that revokes something a restore could bring
back (an invitation, a support grant, an API token, a connector secret) writes one entry here, in the
workspace's region, in the same request as the revocation. ``residency/revocations.py`` replays the entries
after every restore. Ids, digests and times only: never a secret or an address.
"""
from __future__ import annotations

import hashlib

from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import PutError

from chalicelib.core.store.tables import BaseModel, regional

INVITATION, SUPPORT_GRANT, API_TOKEN = "invitation", "support_grant", "api_token"
CONNECTOR_SECRET = "connector_secret"
KINDS = (INVITATION, SUPPORT_GRANT, API_TOKEN, CONNECTOR_SECRET)
API_TOKEN_REASON = "api_token_revoked"


class RevocationAttrs(BaseModel):
    """One revoked invitation, support grant, API token or connector secret of a workspace."""

    TABLE = "revocation_ledger"
    workspace_id = UnicodeAttribute(hash_key=True)
    ref = UnicodeAttribute(range_key=True)  # <kind>#<id>
    revoked_at = UnicodeAttribute()  # RFC 3339, as the revoked item records it
    revoked_by = UnicodeAttribute(null=True)  # the acting user's id


def revocation_ledger(region: str) -> type[RevocationAttrs]:
    return regional(RevocationAttrs, region)


def secret_ref(connector_id: str, ciphertext: str) -> str:
    """The ledger id of one stored connector secret: its connector and the digest of its ciphertext."""
    return f"{connector_id}:{hashlib.sha256(ciphertext.encode()).hexdigest()[:32]}"


def record(region: str, workspace_id: str, kind: str, item_id: str, revoked_at: str, revoked_by: str | None) -> None:
    """Write the ledger entry of one revocation in the workspace's ``region`` (in the same request as the
    revocation, before it is answered). Idempotent: the first entry stays."""
    if kind not in KINDS:
        raise ValueError(f"unknown revocation kind {kind!r}")
    cls = revocation_ledger(region)
    try:
        cls(workspace_id, f"{kind}#{item_id}", revoked_at=revoked_at, revoked_by=revoked_by).save(
            condition=cls.ref.does_not_exist())
    except PutError:
        pass  # already recorded
