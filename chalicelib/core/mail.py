"""Outgoing e-mail through SES. When ``MAIL_OUTBOX_DIR`` is set (``make run`` sets it to
``.local/outbox``), a copy of each message is also written there as JSON so a developer can read
sign-in codes, reset links and invitations without a mail server."""
from __future__ import annotations

import json
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
        Path(outbox).mkdir(parents=True, exist_ok=True)
        record: dict[str, Any] = {"id": message_id, "to": to, "subject": subject, "text": text, "tag": tag,
                                  "sent_at": clock.iso()}
        # a file name holds 255 bytes; an address may have 254 characters
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{clock.iso()}_{to[:128]}_{tag[:64]}")
        (Path(outbox) / f"{safe}.json").write_text(json.dumps(record, indent=2))
    return message_id


def ensure_sender(region: str | None = None) -> None:
    """Verify the sender identity (required by SES, also by moto)."""
    aws.client("ses", region or settings().global_region).verify_email_identity(EmailAddress=settings().mail_sender)
