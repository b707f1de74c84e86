"""Canonical names of AWS sources, checked before a connector is stored.

A source may be written as a name, an ARN, an ``s3://`` URL, an access point, an alias, or a form
naming another account or region. Each is reduced to one canonical form, or refused with the field and
a reason; what is left is refused when it is one of the platform's own resources. The platform's
resources all carry its ``resource_prefix`` (``infra/resources.py``), compared case-insensitively.

- s3 ``bucket``: a bucket name, ``arn:aws:s3:::<bucket>`` or ``s3://<bucket>`` -> the bucket name.
  Access points (ARN or ``-s3alias`` alias), Object Lambda and multi-region access points and directory
  buckets are refused: they hide which bucket is read.
- dynamodb ``table``: a table name or ``arn:aws:dynamodb:<region>:<account>:table/<name>`` -> the name.
  The ARN must be of the workspace's region and of the role's account; index and stream ARNs are refused.
- ``role_arn``: ``arn:<partition>:iam::<account>:role/<path><name>``; never of the platform's account.
"""
from __future__ import annotations

import re
from typing import Any

from chalicelib.core.config import settings
from chalicelib.gateway.ingest.source_access import ROLE_ARN_RE

BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
TABLE_RE = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
_S3_ARN = re.compile(r"^arn:(aws|aws-cn|aws-us-gov):s3:([a-z0-9-]*):(\d{12})?:(.+)$")
_DDB_ARN = re.compile(r"^arn:(aws|aws-cn|aws-us-gov):dynamodb:([a-z0-9-]+):(\d{12}):table/([A-Za-z0-9_.-]{3,255})(/.*)?$")
_HIDDEN_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", "--x-s3", ".mrap")
_IP = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")

Problem = dict[str, str]


class Refused(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.problem: Problem = {"field": field, "message": message}


def is_platform_name(name: str) -> bool:
    """True for a name the platform's own resources use (its prefix, any case)."""
    prefix = settings().resource_prefix.lower()
    low = name.lower()
    return low == prefix or low.startswith(prefix + "-") or low.startswith(prefix + "_") or low.startswith(prefix + ".")


def bucket(value: Any) -> str:
    """The canonical bucket name of ``value`` (see the module docstring), or ``Refused``."""
    if not isinstance(value, str):
        raise Refused("bucket", "must be a string")
    raw = value.strip()
    if raw.lower().startswith("s3://"):
        raw = raw[5:].split("/", 1)[0]
    m = _S3_ARN.match(raw)
    if m:
        region, account, rest = m.group(2), m.group(3), m.group(4)
        if region or account or "/" in rest or rest.startswith("accesspoint"):
            raise Refused("bucket", "access points and other S3 ARNs are not accepted: name the bucket itself")
        raw = rest
    if raw.startswith("arn:"):
        raise Refused("bucket", "is not an S3 bucket name or bucket ARN")
    if any(raw.endswith(s) for s in _HIDDEN_BUCKET_SUFFIXES):
        raise Refused("bucket", "access point aliases and directory buckets are not accepted: name the bucket itself")
    if not BUCKET_RE.match(raw) or ".." in raw or _IP.match(raw) or raw.startswith("xn--"):
        raise Refused("bucket", "is not a valid S3 bucket name")
    if is_platform_name(raw):
        raise Refused("bucket", "must not be one of the platform's own buckets")
    return raw


def table(value: Any, *, region: str, role_account: str | None) -> str:
    """The canonical table name of ``value`` (see the module docstring), or ``Refused``."""
    if not isinstance(value, str):
        raise Refused("table", "must be a string")
    raw = value.strip()
    if raw.startswith("arn:"):
        m = _DDB_ARN.match(raw)
        if not m:
            raise Refused("table", "is not a DynamoDB table name or table ARN")
        arn_region, account, name, tail = m.group(2), m.group(3), m.group(4), m.group(5)
        if tail:
            raise Refused("table", "index and stream ARNs are not accepted: name the table")
        if arn_region != region:
            raise Refused("table", f"must be a table of the workspace's region ({region})")
        if role_account is not None and account != role_account:
            raise Refused("table", "must be a table of the role's own account")
        raw = name
    if not TABLE_RE.match(raw):
        raise Refused("table", "is not a valid DynamoDB table name")
    if is_platform_name(raw):
        raise Refused("table", "must not be one of the platform's own tables")
    return raw


def role(value: Any, *, platform_account: str) -> str:
    """The role ARN, checked: a role of another account than the platform's."""

    if not isinstance(value, str):
        raise Refused("role_arn", "must be a string")
    m = ROLE_ARN_RE.match(value.strip())
    if not m:
        raise Refused("role_arn", "must be an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
    if m.group(2) == platform_account:
        raise Refused("role_arn", "must be a role of the workspace's own AWS account, not the platform's")
    if is_platform_name(m.group(4)):
        raise Refused("role_arn", "must not be one of the platform's own roles")
    return value.strip()
