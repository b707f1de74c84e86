"""Connector secrets: encrypted with the region's KMS ``data`` key, bound to workspace and connector by
the encryption context, stored only as ciphertext and never returned by any route."""
from __future__ import annotations

import base64

from chalicelib.core import aws


def _context(workspace_id: str, connector_id: str) -> dict[str, str]:
    return {"workspace_id": workspace_id, "connector_id": connector_id, "purpose": "connector-secret"}


def encrypt(region: str, workspace_id: str, connector_id: str, plaintext: str) -> str:
    blob = aws.client("kms", region).encrypt(
        KeyId=aws.key_alias("data"), Plaintext=plaintext.encode("utf-8"),
        EncryptionContext=_context(workspace_id, connector_id))["CiphertextBlob"]
    return base64.b64encode(blob).decode("ascii")


def decrypt(region: str, workspace_id: str, connector_id: str, ciphertext: str) -> str:
    out = aws.client("kms", region).decrypt(
        CiphertextBlob=base64.b64decode(ciphertext), EncryptionContext=_context(workspace_id, connector_id))
    return out["Plaintext"].decode("utf-8")
