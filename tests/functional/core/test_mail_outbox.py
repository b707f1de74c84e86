"""The local mail outbox holds sign-in codes, reset links and invitations: only its owner may read it."""
from __future__ import annotations

import stat

from chalicelib.core import mail
from tests.functional.conftest import Outbox, make_tenant
from tests.functional.platform.helpers import call
from tests.functional.residency.helpers import client


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_invitation_lands_in_an_outbox_only_its_owner_can_read(outbox: Outbox) -> None:
    outbox.path.chmod(0o755)  # an outbox written by an older version, world-readable
    old = outbox.path / "old.txt"
    old.write_text("{}")
    old.chmod(0o644)
    owner = make_tenant("owner@example.com", name="Mail Co")
    status, inv, _ = call(client(), "POST", f"/v1/workspaces/{owner.workspace_id}/invitations", owner.token,
                          {"email": "newcomer@example.com", "role": "member"})
    assert status == 201, inv
    [written] = [p for p in outbox.path.glob("*.json") if p != old]
    assert outbox.messages("newcomer@example.com")
    assert _mode(outbox.path) == 0o700
    assert _mode(written) == 0o600
    # make run's start makes an existing outbox private, files included
    assert _mode(old) == 0o644
    mail.private_outbox(outbox.path)
    assert _mode(old) == 0o600 and _mode(outbox.path) == 0o700


def test_a_new_outbox_is_private_from_its_creation(outbox: Outbox) -> None:
    fresh = outbox.path / "nested" / "outbox"
    assert _mode(mail.private_outbox(fresh)) == 0o700
    mail._write_private(fresh / "m.json", "{}")
    assert _mode(fresh / "m.json") == 0o600
