"""The generated leak matrix: field policy {ALLOW, MASK, HASH, REDACT, DENY} x column role {key, non-key} x
document ACL {open, restricted} x every reading surface (``surfaces.SURFACES``). Each case has planted a
unique marker value in that cell of the matrix datasets (``world.py``) and scans the whole of what the
surface gave the Member, and the stored artefacts, for it:

- a value under a policy other than ALLOW, or a row of a document restricted from the Member, must not be
  anywhere in it;
- an ALLOW value of an open row must be there on surfaces that return row values (so a surface that
  silently returned nothing cannot pass).

The workspace is built once for the module; each surface is read once and every case only scans.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from chalicelib.core.tenancy import scope_of
from chalicelib.identity.oauth import signing
from tests.functional.conftest import _wipe, reset_process_state
from tests.functional.reader import world as matrix
from tests.functional.reader.surfaces import SURFACES, Surface, read


@pytest.fixture(scope="module")
def world(_moto: None) -> Iterator[matrix.World]:
    _wipe()
    reset_process_state()
    signing.ensure_key()
    yield matrix.build()
    reset_process_state()


def _cases() -> Iterator[object]:
    for surface in SURFACES:
        for policy in matrix.POLICIES:
            for role in matrix.ROLES:
                for acl in matrix.ACLS:
                    hidden = policy != "ALLOW" or (acl == "restricted" and surface.acl_applies)
                    if not hidden and not surface.shows_values:
                        continue  # nothing this surface must show or hide in this cell
                    yield pytest.param(surface, policy, role, acl, hidden,
                                       id=f"{surface.name}-{policy.lower()}-{role}-{acl}")


@pytest.mark.parametrize(("surface", "policy", "role", "acl", "hidden"), list(_cases()))
def test_marker(world: matrix.World, surface: Surface, policy: str, role: str, acl: str, hidden: bool) -> None:
    seen = read(world, surface)
    value = world.markers[(role, policy, acl)]
    if hidden:
        assert value not in seen, f"{surface.name} gave the Member a {policy} {role} value of a {acl} document"
    else:
        assert value in seen, f"{surface.name} did not return the ALLOW {role} value of an {acl} document"


def test_every_surface_is_in_the_matrix() -> None:
    """The list names each surface once (a copy-paste would make one surface count twice)."""
    names = [s.name for s in SURFACES]
    assert len(names) == len(set(names)) >= 10


# the surfaces that show the group's grant reached the Member: reads that store nothing (a chat answered
# now would keep what it quoted, and the Member's own stored chats are not re-filtered when a grant ends)
GRANT_PROOF = ("rest_query", "knowledge_search")


def test_a_member_removed_from_a_group_loses_what_it_gave_everywhere(world: matrix.World) -> None:
    """The restricted documents are granted to a group the Member is in: the query and search surfaces
    show the Member their ALLOW values. The Member leaves the group: from the next request no
    surface gives those values (the same token, no new sign-in); each surface is read once, over the
    ALLOW dataset. The module's
    ACLs are put back afterwards, and the cached reads of the other cases are left untouched."""
    from dataclasses import replace

    from chalicelib.core.audit import Actor
    from chalicelib.core.tenancy import workspace_scope
    from chalicelib.gateway import reader
    from chalicelib.platform.workspaces import groups

    scope = workspace_scope(world.tenant.workspace_id)
    actor = Actor("user", world.tenant.user_id, world.tenant.email)
    group = groups.create_group(scope, "Matrix readers", actor=actor)
    groups.add_member(scope, group, world.member.user_id, actor=actor)

    def restrict(acl: list[dict[str, str]]) -> None:
        for policy in matrix.POLICIES:
            reader.set_document_acl(scope_of(world.admin()), world.datasets[policy], world.documents[(policy, "restricted")], acl)

    granted = [world.markers[(role, "ALLOW", "restricted")] for role in matrix.ROLES]
    try:
        restrict([{"type": "role", "id": "admin"}, {"type": "group", "id": group.group_id}])
        fresh = replace(world, cache={}, policies=("ALLOW",))
        for surface in (s for s in SURFACES if s.name in GRANT_PROOF):
            seen = surface.read(fresh)
            assert all(m in seen for m in granted), f"{surface.name} did not give the group's grant to its member"
        groups.remove_member(scope, groups.get_group(scope, group.group_id), world.member.user_id, actor=actor)
        # the ALLOW dataset only: a value under any other policy is hidden whatever the ACL (the matrix
        # above proves that on every surface), so the grant could only have shown ALLOW values
        after = replace(world, cache={}, policies=("ALLOW",))
        for surface in (s for s in SURFACES if s.acl_applies):
            seen = surface.read(after)
            assert not [m for m in granted if m in seen], f"{surface.name} still gave what the group granted"
    finally:
        restrict([{"type": "role", "id": "admin"}])
        groups.delete_group(scope, groups.get_group(scope, group.group_id), actor=actor)
