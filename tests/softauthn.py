"""A software WebAuthn authenticator for tests (ES256, ``none`` attestation): builds registration and
assertion responses the way a browser would, so the server's checks can be exercised and attacked."""
from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url

UP, UV, AT = 0x01, 0x04, 0x40


@dataclass
class SoftAuthenticator:
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    credential_id: bytes = field(default_factory=lambda: os.urandom(32))
    counter: int = 0
    user_handle: bytes = b""

    def _cose(self) -> bytes:
        nums = self.key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: nums.x.to_bytes(32, "big"), -3: nums.y.to_bytes(32, "big")})

    @staticmethod
    def _client_data(kind: str, challenge: str, origin: str) -> bytes:
        return json.dumps({"type": kind, "challenge": challenge, "origin": origin, "crossOrigin": False}).encode()

    def create(self, public_key: dict[str, Any], origin: str, rp_id: str | None = None, uv: bool = True) -> dict[str, Any]:
        rp_id = rp_id or public_key["rp"]["id"]
        self.user_handle = base64url_to_bytes(public_key["user"]["id"])
        flags = UP | AT | (UV if uv else 0)
        auth_data = (hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + struct.pack(">I", self.counter)
                     + b"\0" * 16 + struct.pack(">H", len(self.credential_id)) + self.credential_id + self._cose())
        client_data = self._client_data("webauthn.create", public_key["challenge"], origin)
        att = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        cid = bytes_to_base64url(self.credential_id)
        return {"id": cid, "rawId": cid, "type": "public-key", "clientExtensionResults": {},
                "response": {"clientDataJSON": bytes_to_base64url(client_data),
                             "attestationObject": bytes_to_base64url(att), "transports": ["internal"]}}

    def get(self, public_key: dict[str, Any], origin: str, rp_id: str | None = None, uv: bool = True,
            counter: int | None = None) -> dict[str, Any]:
        rp_id = rp_id or public_key["rpId"]
        self.counter = self.counter + 1 if counter is None else counter
        auth_data = hashlib.sha256(rp_id.encode()).digest() + bytes([UP | (UV if uv else 0)]) + struct.pack(">I", self.counter)
        client_data = self._client_data("webauthn.get", public_key["challenge"], origin)
        sig = self.key.sign(auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256()))
        cid = bytes_to_base64url(self.credential_id)
        return {"id": cid, "rawId": cid, "type": "public-key", "clientExtensionResults": {},
                "response": {"clientDataJSON": bytes_to_base64url(client_data),
                             "authenticatorData": bytes_to_base64url(auth_data),
                             "signature": bytes_to_base64url(sig),
                             "userHandle": bytes_to_base64url(self.user_handle)}}
