"""KMS in one place: small secrets encrypted under one of the region's keys, and data keys for envelope
encryption. Every ciphertext is bound to what it is for by one convention of encryption context,
``{"purpose": <purpose>, **bindings}`` (KMS refuses to decrypt under any other context), and is carried as
base64 text."""
from __future__ import annotations

import base64

from chalicelib.core import aws


def _context(purpose: str, bindings: dict[str, str]) -> dict[str, str]:
    return {"purpose": purpose, **bindings}


def encrypt(region: str, key: str, purpose: str, plaintext: bytes, **bindings: str) -> str:
    """Ciphertext (base64) of ``plaintext`` under the region's ``key`` (a name from ``infra/resources.py``)."""
    out = aws.client("kms", region).encrypt(KeyId=aws.key_alias(key), Plaintext=plaintext,
                                            EncryptionContext=_context(purpose, bindings))
    return base64.b64encode(out["CiphertextBlob"]).decode()


def decrypt(region: str, purpose: str, ciphertext: str, **bindings: str) -> bytes:
    out = aws.client("kms", region).decrypt(CiphertextBlob=base64.b64decode(ciphertext),
                                            EncryptionContext=_context(purpose, bindings))
    return bytes(out["Plaintext"])


def new_data_key(region: str, key: str, purpose: str, **bindings: str) -> tuple[bytes, str]:
    """A fresh AES-256 data key: (plaintext, wrapped as base64)."""
    out = aws.client("kms", region).generate_data_key(KeyId=aws.key_alias(key), KeySpec="AES_256",
                                                      EncryptionContext=_context(purpose, bindings))
    return bytes(out["Plaintext"]), base64.b64encode(out["CiphertextBlob"]).decode()


def unwrap_data_key(region: str, key: str, purpose: str, wrapped: str, **bindings: str) -> bytes:
    """The plaintext of a data key made by ``new_data_key`` (only ``key`` may unwrap it)."""
    out = aws.client("kms", region).decrypt(CiphertextBlob=base64.b64decode(wrapped), KeyId=aws.key_alias(key),
                                            EncryptionContext=_context(purpose, bindings))
    return bytes(out["Plaintext"])
