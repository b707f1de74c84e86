"""Outgoing e-mail through SES. When ``MAIL_OUTBOX_DIR`` is set (``make run`` sets it to
``.local/outbox``), a copy of each message is also written there as JSON so a developer can read
sign-in codes, reset links and invitations without a mail server. Those hold secrets: the directory is
private to its owner (0700) and each file too (0600, created so; never readable by others in between),
like ``run.json``."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from chalicelib.core import aws, clock
from chalicelib.core.config import settings
from chalicelib.core.ids import new_id


def send(to: str, subject: str, text: str, *, region: str | None = None, tag: str = "") -> str:
    """Send one plain-text message; returns its id."""
    region = region or settings().global_region
    ses = aws.client("ses", region)
    result = ses.send_email(Source=settings().mail_sender, Destination={"ToAddresses": [to]},
                            Message={"Subject": {"Data": subject}, "Body": {"Text": {"Data": text}}})
    message_id = result.get("MessageId") or new_id("msg")
    outbox = settings().mail_outbox_dir
    if outbox:
        _private_dir(Path(outbox))
        record: dict[str, Any] = {"id": message_id, "to": to, "subject": subject, "text": text, "tag": tag,
                                  "sent_at": clock.iso()}
        # a file name holds 255 bytes; an address may have 254 characters
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{clock.iso()}_{to[:128]}_{tag[:64]}")
        _write_private(Path(outbox) / f"{safe}.json", json.dumps(record, indent=2))
    return message_id


def private_outbox(outbox: str | Path) -> Path:
    """The outbox directory, created if missing, made 0700 and its files 0600 (an outbox written before
    was 0755/0644)."""
    path = _private_dir(Path(outbox))
    for entry in path.iterdir():
        if entry.is_file() and entry.stat().st_mode & 0o077:
            entry.chmod(0o600)
    return path


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)
    return path


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)  # an existing file keeps its mode through O_CREAT


def ensure_sender(region: str | None = None) -> None:
    """Verify the sender identity (required by SES, also by moto)."""
    aws.client("ses", region or settings().global_region).verify_email_identity(EmailAddress=settings().mail_sender)
