"""Provider API keys: stored only as KMS ciphertext (the region's ``data`` key, with the provider id in
the encryption context), decrypted once per process when first used, never returned or logged.

``python -m chalicelib.llm.secrets <region> <provider id>`` reads a key on stdin and prints the
ciphertext to put in the provider file.
"""
from __future__ import annotations

import sys

from chalicelib.core.process_state import cached
from chalicelib.core.store import kms

PURPOSE = "model-provider-key"


def encrypt(region: str, provider: str, key: str) -> str:
    return kms.encrypt(region, "data", PURPOSE, key.encode(), provider=provider)


@cached(maxsize=64)
def decrypt(region: str, provider: str, ciphertext: str) -> str:
    return kms.decrypt(region, PURPOSE, ciphertext, provider=provider).decode()


if __name__ == "__main__":  # pragma: no cover - operator tool
    print(encrypt(sys.argv[1], sys.argv[2], sys.stdin.readline().strip()))
