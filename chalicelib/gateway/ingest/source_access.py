"""How connectors reach a workspace's AWS sources: never with the platform's own authority.

A ``s3`` or ``dynamodb`` connector names an IAM role (``role_arn``) that the workspace grants to the
platform. Every read assumes that role with STS ``AssumeRole`` and the workspace's ExternalId, and reads
with the temporary credentials it returns, so the source's own account decides what can be read:

- the role's trust policy names the platform's principal and requires ``sts:ExternalId`` equal to the
  workspace's ExternalId (``external_id``): another workspace that names the same role ARN gets its own
  ExternalId passed, and AWS refuses it (the confused-deputy guard AWS documents for third parties);
- the platform's functions hold no read permission on any bucket or table outside their own
  (``infra/template.py``), so a connector cannot fall back to the platform's credentials;
- a role in the platform's own account is refused, and so is any name of a platform resource
  (``source_names``).

Locally the same calls go to the emulator: moto's ``AssumeRole`` answers credentials of the role's
account, so each workspace's sources live in an account of their own there too.
"""
from __future__ import annotations

import re
import threading
import time
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.core import aws, process_state
from chalicelib.core.config import settings
from chalicelib.core.process_state import cached
from chalicelib.gateway.ingest.sources import SourceError, Src, aws_source_error

ROLE_ARN_RE = re.compile(r"^arn:(aws|aws-cn|aws-us-gov):iam::(\d{12}):role/((?:[\w+=,.@-]+/)*)([\w+=,.@-]{1,64})$")
SESSION_SECONDS = 3600  # the default MaxSessionDuration of a role; outlives a sync lease (900 s)
_REFRESH_BEFORE_S = 960  # a session handed out still outlives a whole sync lease (900 s)
_BOTO_CONFIG = Config(retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=5, read_timeout=30)
_lock = threading.Lock()
# (role, workspace, region) -> (expiry, session, its clients by service)
_sessions: dict[tuple[str, str, str], tuple[float, boto3.session.Session, dict[str, Any]]] = {}


def external_id(workspace_id: str) -> str:
    """The workspace's ExternalId: fixed for the workspace's life, unique to it, chosen by the platform
    (never by a caller). It is not a secret: it only has to differ between workspaces."""
    return f"{settings().resource_prefix}-{workspace_id}"


@cached(maxsize=1)
def platform_account() -> str:
    """The AWS account the platform runs in (the account of its own credentials)."""
    return aws.client("sts", settings().global_region).get_caller_identity()["Account"]


def platform_principal() -> str:
    """What a workspace's role must trust: ``CONNECTOR_PRINCIPAL_ARN`` (the workers' role) when set,
    otherwise the platform's account."""
    return settings().connector_principal_arn or f"arn:aws:iam::{platform_account()}:root"


def role_account(role_arn: str) -> str | None:
    m = ROLE_ARN_RE.match(role_arn or "")
    return m.group(2) if m else None


def setup(workspace_id: str) -> dict[str, Any]:
    """What an Admin needs to grant a role to the platform: the principal, the ExternalId, and a trust
    policy to paste (plus the read permissions the role needs, by connector kind)."""
    ext = external_id(workspace_id)
    return {
        "platform_principal": platform_principal(),
        "external_id": ext,
        "trust_policy": {"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"AWS": platform_principal()}, "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"sts:ExternalId": ext}}}]},
        "permissions": {
            "s3": ["s3:ListBucket on arn:aws:s3:::<bucket>", "s3:GetObject on arn:aws:s3:::<bucket>/<prefix>*"],
            "dynamodb": ["dynamodb:DescribeTable and dynamodb:Scan on arn:aws:dynamodb:<region>:<account>:table/<table>"],
        },
    }


def _session(role_arn: str, workspace_id: str, region: str) -> tuple[boto3.session.Session, dict[str, Any]]:
    """The role's session and the clients made from it (one per service, kept as long as the session)."""
    key = (role_arn, workspace_id, region)
    now = time.time()
    with _lock:
        hit = _sessions.get(key)
        if hit is not None and hit[0] - _REFRESH_BEFORE_S > now:
            return hit[1], hit[2]
    try:
        creds = aws.client("sts", region).assume_role(
            RoleArn=role_arn, RoleSessionName=f"connector-{workspace_id}"[:64], ExternalId=external_id(workspace_id),
            DurationSeconds=SESSION_SECONDS)["Credentials"]
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "error")
        raise aws_source_error(f"cannot assume role {role_arn} with this workspace's ExternalId", code) from None
    except BotoCoreError as err:
        raise SourceError(f"cannot assume role {role_arn} ({type(err).__name__})") from None
    session = boto3.session.Session(aws_access_key_id=creds["AccessKeyId"],
                                    aws_secret_access_key=creds["SecretAccessKey"],
                                    aws_session_token=creds["SessionToken"], region_name=region)
    expires = creds["Expiration"].timestamp() if hasattr(creds["Expiration"], "timestamp") else now + SESSION_SECONDS
    clients: dict[str, Any] = {}
    with _lock:
        _sessions[key] = (expires, session, clients)
    return session, clients


def client(src: Src, service: str) -> Any:
    """A client for ``service`` in the workspace's region, acting as the connector's role (never as the
    platform). A connector without a role is refused."""
    role_arn = src.config.get("role_arn")
    if not role_arn or not ROLE_ARN_RE.match(role_arn):
        raise SourceError("the connector has no role_arn: grant the platform a role (see GET /v1/connector-access)",
                          permanent=True)
    if role_account(role_arn) == platform_account():
        raise SourceError("the role must belong to the workspace's own AWS account, not the platform's", permanent=True)
    session, clients = _session(role_arn, src.workspace_id, src.region)
    with _lock:  # a session is not thread-safe, its clients are; making one costs milliseconds per sync
        if service not in clients:
            clients[service] = session.client(service, region_name=src.region, config=_BOTO_CONFIG)
        return clients[service]


def forget() -> None:
    """Drop cached role sessions (tests switch emulators between runs)."""
    with _lock:
        _sessions.clear()


process_state.enrol("gateway.ingest.source_access.sessions", forget)
