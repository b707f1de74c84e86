"""Platform storage. Invitations and support grants are workspace content (regional, the workspace's
region); the support-staff flag and the domain-join index are directory data (global by design)."""
from __future__ import annotations

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute, UnicodeSetAttribute

from chalicelib.core.store.tables import BaseModel, global_model, regional

INVITATION_PREFIX = "inv_"
EMAIL_CLAIM_PREFIX = "email#"


class InvitationAttrs(BaseModel):
    """An invitation (``id`` = ``inv_...``). ``status`` is stored as pending|accepted|revoked; an
    expired invitation is a pending one whose ``expires_at`` has passed (computed on read)."""

    TABLE = "invitations"
    workspace_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)
    email = UnicodeAttribute()
    role = UnicodeAttribute()
    status = UnicodeAttribute()
    invited_by = UnicodeAttribute()  # JSON {id, email}
    created_at = UnicodeAttribute()
    expires_at = NumberAttribute()  # epoch seconds
    accepted_by = UnicodeAttribute(null=True)
    accepted_at = UnicodeAttribute(null=True)
    revoked_at = UnicodeAttribute(null=True)


class InvitationClaimAttrs(BaseModel):
    """``email#<address>``: the one pending invitation of an address in a workspace."""

    TABLE = "invitations"
    workspace_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)
    invitation_id = UnicodeAttribute()
    expires_at = NumberAttribute()


class SupportGrantAttrs(BaseModel):
    TABLE = "support_grants"
    workspace_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)  # grant_...
    support_user_id = UnicodeAttribute()
    support_email = UnicodeAttribute()
    reason = UnicodeAttribute()
    granted_by = UnicodeAttribute()  # JSON {id, email}
    created_at = UnicodeAttribute()
    expires_at = NumberAttribute()
    revoked_at = UnicodeAttribute(null=True)
    revoked_by = UnicodeAttribute(null=True)
    expiry_audited = BooleanAttribute(null=True)


class SupportStaffAttrs(BaseModel):
    """Provider support staff (global directory flag). Provisioned by operators, see support.py."""

    TABLE = "support_staff"
    user_id = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute()
    name = UnicodeAttribute()
    location = UnicodeAttribute(default="")
    active = BooleanAttribute(default=True)
    added_at = UnicodeAttribute()


class DomainJoinIndexAttrs(BaseModel):
    """``domain#<domain>`` in the workspace directory: workspaces with domain-join on for it."""

    TABLE = "workspaces"
    id = UnicodeAttribute(hash_key=True)
    workspace_ids = UnicodeSetAttribute(null=True)


def invitations(region: str) -> type[InvitationAttrs]:
    return regional(InvitationAttrs, region)


def invitation_claims(region: str) -> type[InvitationClaimAttrs]:
    return regional(InvitationClaimAttrs, region)


def support_grants(region: str) -> type[SupportGrantAttrs]:
    return regional(SupportGrantAttrs, region)


def support_staff() -> type[SupportStaffAttrs]:
    return global_model(SupportStaffAttrs)


def domain_index() -> type[DomainJoinIndexAttrs]:
    return global_model(DomainJoinIndexAttrs)


class ReplicationStateAttrs(BaseModel):
    """One workspace's DR replication, in its own (primary) region. No content: the copy's fingerprints
    are the DR objects' names in the secondary region, so this holds only times and counts."""

    TABLE = "replication_state"
    workspace_id = UnicodeAttribute(hash_key=True)
    secondary_region = UnicodeAttribute()
    enabled_at = NumberAttribute()  # epoch seconds DR was turned on
    checkpoint_at = NumberAttribute(null=True)  # start of the last complete pass: all content written
    # before it is in the copy
    last_run = UnicodeAttribute(null=True)  # JSON counts of the last pass


def replication_states(region: str) -> type[ReplicationStateAttrs]:
    return regional(ReplicationStateAttrs, region)


class DirectoryAttrs(BaseModel):
    """The ``directory`` table of a workspace (regional): one item kind per ``key`` prefix, each a class
    below. Group membership lives on the memberships (``core.tenancy``), each edge indexed here too
    (``GroupMemberAttrs``)."""

    TABLE = "directory"
    workspace_id = UnicodeAttribute(hash_key=True)
    key = UnicodeAttribute(range_key=True)


class GroupAttrs(DirectoryAttrs):
    """``grp#<group id>``: a workspace group, made by an Admin (``source`` admin) or by SCIM (scim).
    ``version`` grows with every change of the group or of its members (the SCIM ETag)."""

    group_id = UnicodeAttribute()
    name = UnicodeAttribute()
    description = UnicodeAttribute(default="")
    source = UnicodeAttribute(default="admin")  # admin | scim
    external_id = UnicodeAttribute(null=True)
    version = NumberAttribute(default=1)
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()


class GroupMemberAttrs(DirectoryAttrs):
    """``gmem#<group id>#<user id>``: one edge of a group, written in the transaction that adds the group
    to the ``groups`` set of the membership (or of the SCIM record of a provisioned user that is no
    member now) and deleted in the one that takes it out, so a group's members are a query over that
    group only. ``display`` is the member's address (a provisioned user's ``userName`` when it had no
    membership) when it joined the group."""

    group_id = UnicodeAttribute()
    user_id = UnicodeAttribute()
    display = UnicodeAttribute(default="")


class NameClaimAttrs(DirectoryAttrs):
    """``gname#<lower-cased group name>`` / ``uname#<lower-cased SCIM userName>`` -> the id holding the
    name: group names and SCIM user names are unique in a workspace, case-insensitively."""

    owner_id = UnicodeAttribute()


class ScimUserAttrs(DirectoryAttrs):
    """``user#<user id>``: a user the workspace's identity provider provisioned over SCIM. The resource
    (names, e-mails, enterprise extension) is kept as the provider sent it; ``active`` false means the
    membership was removed (the record stays so the provider can reactivate it)."""

    user_id = UnicodeAttribute()
    user_name = UnicodeAttribute()
    external_id = UnicodeAttribute(null=True)
    active = BooleanAttribute(null=True)  # absent: unassigned, which counts as active
    resource = UnicodeAttribute(default="{}")  # JSON: the SCIM attributes beyond the ones above
    # the groups of a provisioned user that is no member now (deactivated, or no address yet): they move
    # to the membership when it is made, and back here when it is removed (each edge in one place)
    groups = UnicodeSetAttribute(null=True)
    version = NumberAttribute(default=1)
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()


class ScimTokenAttrs(DirectoryAttrs):
    """``tok#<token id>``: a workspace SCIM token; only the SHA-256 of its secret is stored."""

    token_id = UnicodeAttribute()
    name = UnicodeAttribute()
    secret_hash = UnicodeAttribute()
    created_at = UnicodeAttribute()
    created_by = UnicodeAttribute()  # JSON {id, email}
    last_used_at = UnicodeAttribute(null=True)
    revoked_at = UnicodeAttribute(null=True)


def groups_table(region: str) -> type[GroupAttrs]:
    return regional(GroupAttrs, region)


def group_members(region: str) -> type[GroupMemberAttrs]:
    return regional(GroupMemberAttrs, region)


def name_claims(region: str) -> type[NameClaimAttrs]:
    return regional(NameClaimAttrs, region)


def scim_users(region: str) -> type[ScimUserAttrs]:
    return regional(ScimUserAttrs, region)


def scim_tokens(region: str) -> type[ScimTokenAttrs]:
    return regional(ScimTokenAttrs, region)
