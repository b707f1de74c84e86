"""Connector secrets: encrypted with the region's KMS ``data`` key, bound to workspace and connector by
the encryption context, stored only as ciphertext and never returned by any route."""
from __future__ import annotations

from chalicelib.core.store import kms

PURPOSE = "connector-secret"


def encrypt(region: str, workspace_id: str, connector_id: str, plaintext: str) -> str:
    return kms.encrypt(region, "data", PURPOSE, plaintext.encode("utf-8"), workspace_id=workspace_id,
                       connector_id=connector_id)


def decrypt(region: str, workspace_id: str, connector_id: str, ciphertext: str) -> str:
    return kms.decrypt(region, PURPOSE, ciphertext, workspace_id=workspace_id,
                       connector_id=connector_id).decode("utf-8")
