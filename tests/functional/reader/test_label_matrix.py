"""The leak matrix of labelled flows (``label_flows.py``): field policy x column role x document ACL x the
form of the copy {plain, base64, reversed, split} x every surface that returns what an agent run wrote x
{before, after} the holder lost access to the restricted documents. Each case scans the whole of what the
holder got for that copy of that cell's marker:

- after the change, no copy of any marker is anywhere in it: the run that wrote it had read a document the
  holder may no longer read, so everything it wrote after that carries the document's label;
- before it, a copy of a value under a policy other than ALLOW is nowhere (the runs never saw the value),
  and every copy of an ALLOW value is there on surfaces that return memory and steps (so a surface that
  silently returned nothing cannot pass).

The world and both flows are built once for the module; each case only scans.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from chalicelib.identity.oauth import signing
from tests.functional.conftest import _wipe, reset_process_state
from tests.functional.reader import label_flows as flows_
from tests.functional.reader import world as matrix


@pytest.fixture(scope="module")
def flows(_moto: None) -> Iterator[flows_.Flows]:
    _wipe()
    reset_process_state()
    signing.ensure_key()
    yield flows_.build(matrix.build())
    reset_process_state()


def _cases() -> Iterator[object]:
    for surface in flows_.LABEL_SURFACES:
        for phase in surface.phases:
            for policy in matrix.POLICIES:
                for role in matrix.ROLES:
                    for acl in matrix.ACLS:
                        for form in flows_.FORMS:
                            hidden = policy != "ALLOW" or phase == "after"
                            if not hidden and not surface.shows_values:
                                continue
                            yield pytest.param(surface, phase, policy, role, acl, form, hidden,
                                               id=f"{surface.name}-{phase}-{policy.lower()}-{role}-{acl}-{form}")


@pytest.mark.parametrize(("surface", "phase", "policy", "role", "acl", "form", "hidden"), list(_cases()))
def test_copy(flows: flows_.Flows, surface: flows_.LabelSurface, phase: str, policy: str, role: str, acl: str,
              form: str, hidden: bool) -> None:
    seen = flows_.read(flows, surface, phase)
    copy = flows_.form(flows.world.markers[(role, policy, acl)], form)
    if hidden:
        assert copy not in seen, f"{surface.name} ({phase}) gave the holder a {form} copy of a {policy} {role} value"
    else:
        assert copy in seen, f"{surface.name} ({phase}) lacks the {form} copy of the ALLOW {role} value ({acl})"
