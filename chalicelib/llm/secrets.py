"""Provider API keys: stored only as KMS ciphertext (the region's ``data`` key, with the provider id in
the encryption context), decrypted once per process when first used, never returned or logged.

``python -m chalicelib.llm.secrets <region> <provider id>`` reads a key on stdin and prints the
ciphertext to put in the provider file.
"""
from __future__ import annotations

import base64
import sys
from functools import lru_cache

from chalicelib.core import aws

PURPOSE = "model-provider-key"


def _context(provider: str) -> dict[str, str]:
    return {"aiplat:purpose": PURPOSE, "aiplat:provider": provider}


def encrypt(region: str, provider: str, key: str) -> str:
    out = aws.client("kms", region).encrypt(KeyId=aws.key_alias("data"), Plaintext=key.encode(),
                                            EncryptionContext=_context(provider))
    return base64.b64encode(out["CiphertextBlob"]).decode()


@lru_cache(maxsize=64)
def decrypt(region: str, provider: str, ciphertext: str) -> str:
    out = aws.client("kms", region).decrypt(CiphertextBlob=base64.b64decode(ciphertext),
                                            EncryptionContext=_context(provider))
    return bytes(out["Plaintext"]).decode()


if __name__ == "__main__":  # pragma: no cover - operator tool
    print(encrypt(sys.argv[1], sys.argv[2], sys.stdin.readline().strip()))
