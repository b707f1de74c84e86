"""The one permission map (spec "Roles"), checked in one place. Deny by default."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from chalicelib.core.http.errors import forbidden, not_found

# RFC 8176 methods that count as a second factor (or a passkey with user verification).
MFA_AMR = frozenset({"mfa", "otp", "hwk", "swk"})


def mfa_used(amr: Iterable[str]) -> bool:
    """True when the authentication methods include a second factor or a passkey."""
    return bool(MFA_AMR.intersection(amr))


class Role(str, Enum):
    ADMIN = "admin"
    MEMBER = "member"
    VIEWER = "viewer"


ROLE_VALUES: tuple[str, ...] = tuple(r.value for r in Role)

_A = frozenset({Role.ADMIN})
_AM = frozenset({Role.ADMIN, Role.MEMBER})
_AV = frozenset({Role.ADMIN, Role.VIEWER})
_ALL = frozenset(Role)

# Any verified token, whatever its roles: user-level actions not bound to the token's workspace
# (create a workspace, list one's workspaces, accept an invitation, domain-join, support access with a grant).
AUTHENTICATED = "authenticated"

# Admin: everything. Member: chat, knowledge, agents. Viewer: read-only audit and dashboards.
PERMISSIONS: dict[str, frozenset[Role]] = {
    "workspace.read": _ALL,
    "workspace.update": _A,
    "billing.manage": _A,
    "members.read": _A,
    "members.manage": _A,  # change role, remove, unlock, reset MFA
    "invitations.manage": _A,
    "support.grant": _A,
    "audit.read": _AV,
    "audit.export": _A,
    "chat.use": _AM,
    "agents.run": _AM,
    "agents.manage": _AM,
    "agents.read": _ALL,  # agent definitions (Viewers read them); runs are seen by their starter and Admins
    "knowledge.read": _AM,  # catalog, schema, lineage, federated query
    "dashboards.read": _ALL,  # connector health and data freshness
    "connectors.manage": _A,  # create, edit, delete, sync
    "policies.read": _AM,
    "policies.manage": _A,  # field policies
    "sso.manage": _A,
    "backups.manage": _A,  # back up, list, request and approve restores
    "access_requests.create": _ALL,  # export or erasure: one's own account; an Admin's about a member
    # user-level actions, not bound to the token's workspace: any verified token, even one without a role
    # (Principal.can answers True before looking at roles); see AUTHENTICATED above
    AUTHENTICATED: _ALL,
}


@dataclass(frozen=True)
class Principal:
    """Who is calling, as proven by a verified access token."""

    user_id: str
    workspace_id: str
    roles: tuple[str, ...]
    email: str
    amr: tuple[str, ...]
    token_id: str
    claims: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    membership: Any = field(default=None, compare=False, repr=False)  # the live record, once read
    # The dataset scope: when set, the only dataset ids this principal may read (an agent limited to the
    # datasets its builder ticked). It narrows the dataset ACL (``catalog.can_read``), never widens it;
    # an empty set reads nothing. ``None``: every dataset the ACL lets the user read.
    datasets: frozenset[str] | None = None
    # The workspace groups the caller belongs to now (``grp_...`` ids, from the live membership): ACLs,
    # dataset grants and model allow-lists match ``group:<id>`` entries against them like user entries.
    groups: frozenset[str] = frozenset()

    def can(self, permission: str) -> bool:
        if permission == AUTHENTICATED:
            return True
        allowed = PERMISSIONS.get(permission)
        if allowed is None:
            return False
        return any(r in allowed for r in self.roles)


def require(principal: Principal, permission: str) -> None:
    """Raise 403 unless one of the principal's roles grants ``permission``; unknown permissions deny."""
    if not principal.can(permission):
        raise forbidden()


def require_workspace(principal: Principal, workspace_id: str, what: str = "workspace") -> None:
    """A token acts only on its own workspace: any other one answers 404, never its content."""
    if workspace_id != principal.workspace_id:
        raise not_found(what)
