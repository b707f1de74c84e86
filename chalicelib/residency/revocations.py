"""The revocation ledger's replay: no restore brings back a revoked invitation, support grant, API token or
connector secret. (Each context records its revocations with ``core/store/revocation_ledger.py``.)

A backup holds invitations and support grants as they were then; restoring it would turn an invitation
revoked since back into a pending one (its invitee could join with its role) and a revoked grant back
into an active one. So every revocation also writes a ledger entry (``revocation_ledger``, regional, in
the workspace's region, never backed up, holding only ids and times), and ``replay`` runs after every
restore, as the erasure ledger is (``residency/restore.py``): each entry's item is revoked again when a
restore brought it back. API tokens live in the global store, which a workspace restore does not touch;
their entries are replayed all the same (the token's record and its revocation marker are rewritten when
missing), so a restore of the global store is answered by the same replay. A connector secret that was
replaced or whose connector was deleted is recorded by the digest of its ciphertext (never the secret):
when a restore brings that ciphertext back, it is removed and the connector paused with a message
asking for the credentials again.
"""
from __future__ import annotations

import json

from pynamodb.exceptions import DeleteError, DoesNotExist, UpdateError

from chalicelib.core import clock
from chalicelib.core.logs import get_logger
from chalicelib.core.store.revocation_ledger import (
    API_TOKEN,
    API_TOKEN_REASON,
    CONNECTOR_SECRET,
    INVITATION,
    KINDS,
    SUPPORT_GRANT,
    revocation_ledger,
    secret_ref,
)
from chalicelib.core.store.tables import global_model
from chalicelib.core.tokens import RevokedTokenAttrs
from chalicelib.gateway.ingest.connectors import sealed_secrets
from chalicelib.gateway.models import connectors
from chalicelib.identity.models import ApiTokenAttrs
from chalicelib.identity.oauth.revocation import revoke_jti
from chalicelib.platform.models import EMAIL_CLAIM_PREFIX, invitation_claims, invitations, support_grants

log = get_logger("residency.revocations")
REVOKED_SECRET_ERROR = ("A credential of this connector was replaced or revoked after the backup this "
                        "workspace was restored from; enter the connector's credentials again, then resume it.")


def replay(region: str, workspace_id: str) -> dict[str, int]:
    """Revoke again every ledger entry's item that a restore brought back; returns counts per kind of
    items revoked again (entries whose item is still revoked, or absent, count nothing)."""
    counts = {kind: 0 for kind in KINDS}
    for entry in revocation_ledger(region).query(workspace_id, consistent_read=True):
        kind, _, item_id = entry.ref.partition("#")
        again = {INVITATION: _invitation, SUPPORT_GRANT: _support_grant, API_TOKEN: _api_token,
                 CONNECTOR_SECRET: _connector_secret}[kind]
        if again(region, workspace_id, item_id, entry.revoked_at, entry.revoked_by):
            counts[kind] += 1
            log.info("revocation replayed", extra={"workspace_id": workspace_id, "kind": kind, "id": item_id})
    return counts


def _invitation(region: str, ws: str, item_id: str, revoked_at: str, _by: str | None) -> bool:
    cls, claims = invitations(region), invitation_claims(region)
    try:
        inv = cls.get(ws, item_id, consistent_read=True)
    except DoesNotExist:
        return False
    changed = False
    if inv.status != "revoked":
        inv.update(actions=[cls.status.set("revoked"), cls.revoked_at.set(revoked_at)])
        changed = True
    try:  # the address's one-pending-invitation claim, when it still names this invitation
        claims(ws, EMAIL_CLAIM_PREFIX + inv.email).delete(condition=claims.invitation_id == item_id)
        changed = True
    except DeleteError:  # absent, or another invitation's claim: nothing to undo
        pass
    return changed


def _support_grant(region: str, ws: str, item_id: str, revoked_at: str, by: str | None) -> bool:
    cls = support_grants(region)
    try:
        grant = cls.get(ws, item_id, consistent_read=True)
        grant.update(actions=[cls.revoked_at.set(revoked_at), cls.revoked_by.set(by or "")],
                     condition=cls.revoked_at.does_not_exist())
    except (DoesNotExist, UpdateError):
        return False  # absent, or still revoked
    return True


def _api_token(_region: str, _ws: str, item_id: str, revoked_at: str, _by: str | None) -> bool:
    cls = global_model(ApiTokenAttrs)
    try:
        token = cls.get(item_id, consistent_read=True)
    except DoesNotExist:
        return False  # purged after expiry: nothing can use it
    changed = False
    if not token.revoked_at:
        token.update(actions=[cls.revoked_at.set(int(clock.parse_iso(revoked_at).timestamp()))])
        changed = True
    try:  # the marker every verifier consults
        global_model(RevokedTokenAttrs).get(token.id, consistent_read=True)
    except DoesNotExist:
        revoke_jti(token.id, token.expires_at, API_TOKEN_REASON, token.user_id)
        changed = token.expires_at > clock.now() or changed
    return changed


def _connector_secret(region: str, ws: str, item_id: str, _at: str, _by: str | None) -> bool:
    connector_id = item_id.partition(":")[0]
    cls = connectors(region)
    try:
        item = cls.get(ws, connector_id, consistent_read=True)
    except DoesNotExist:
        return False
    stored = json.loads(item.config or "{}")
    revoked = [name for name, cipher in sealed_secrets(item.config).items()
               if secret_ref(connector_id, cipher) == item_id]
    if not revoked:
        return False
    for name in revoked:
        stored.pop(name)
    item.update(actions=[cls.config.set(json.dumps(stored)), cls.status.set("PAUSED"),
                         cls.last_error.set(REVOKED_SECRET_ERROR), cls.updated_at.set(clock.iso())])
    return True
