"""Writing token revocations: the ``revoked_tokens`` table that every verifier re-reads.

A revoked jti is refused at once by this process (its revocation list is invalidated) and by every
other process within ``tokens.REVOCATION_REFRESH_SECONDS`` (30 s), the documented bound. The item
expires (DynamoDB TTL) with the token itself.
"""
from __future__ import annotations

from chalicelib.core import clock
from chalicelib.core.models import global_model
from chalicelib.core.tokens import LEEWAY_SECONDS, RevokedTokenAttrs, verifier


def revoke_jti(jti: str, expires_at: float, reason: str) -> None:
    if float(expires_at) + LEEWAY_SECONDS <= clock.now():
        return  # already expired: nothing to refuse
    global_model(RevokedTokenAttrs)(jti, expires_at=int(expires_at) + LEEWAY_SECONDS, reason=reason[:64]).save()
    verifier().revocations.invalidate()
