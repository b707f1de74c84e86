"""Connectors never read with the platform's authority: attacks on the source names, the role, the
ExternalId, another workspace's source, DNS rebinding, and secrets in a connector URL."""
from __future__ import annotations

import json
import re
import socket
from typing import Any

import pytest
from moto.core import set_initial_no_auth_action_count

from chalicelib.core import aws, process_state
from chalicelib.core.config import settings
from chalicelib.gateway import models
from chalicelib.gateway.ingest import source_access
from chalicelib.gateway.ingest.sources import SourceError, Src
from chalicelib.gateway.ingest.sources.http_api import check_address, public_url
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.gateway.local_api import LocalApi
from tests.functional.gateway.sync_helpers import (
    READER_ROLE,
    SOURCE_ACCOUNT,
    call,
    client,
    drain,
    new_bucket,
    put,
    source_client,
    token_for,
)

PLATFORM_ACCOUNT = "123456789012"  # moto's account: the platform's own


def _refused(tenant: Tenant, kind: str, config: dict[str, Any], field: str) -> dict[str, Any]:
    with client() as c:
        st, err = call(c, "POST", "/v1/connectors", tenant.token, {"name": "attack", "kind": kind, "config": config})
    assert st == 400, err
    assert err["code"] == "validation_failed", err
    assert field in [e["field"] for e in err["errors"]], err
    assert models.connectors(tenant.region).count(tenant.workspace_id) == 0  # nothing stored
    return err


def _platform_tables(region: str) -> list[str]:
    return [t for t in aws.client("dynamodb", region).list_tables()["TableNames"]
            if t.startswith(settings().resource_prefix + "-")]


@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1"])
def test_platform_tables_are_refused_in_every_form(tenant: Tenant, region: str) -> None:
    tables = _platform_tables(region)
    assert f"{settings().resource_prefix}-memberships" in tables
    ws_region = tenant.region
    # every spelling on a few tables (the canonicalisation is one function of the name), and the name and the
    # ARN that got through before on every table
    every_form = {f"{settings().resource_prefix}-memberships", tables[0], tables[-1]}
    for name in tables:
        forms = [
            name, name.upper(), f"  {name} ",
            f"arn:aws:dynamodb:{ws_region}:{SOURCE_ACCOUNT}:table/{name}",  # the ARN that got through before
            f"arn:aws:dynamodb:{ws_region}:{PLATFORM_ACCOUNT}:table/{name}",
            f"arn:aws:dynamodb:{region}:{SOURCE_ACCOUNT}:table/{name}",
            f"arn:aws:dynamodb:{ws_region}:{SOURCE_ACCOUNT}:table/{name}/index/by_user",
            f"arn:aws:dynamodb:{ws_region}:{SOURCE_ACCOUNT}:table/{name}/stream/2024-01-01T00:00:00.000",
            f"arn:aws-cn:dynamodb:{ws_region}:{SOURCE_ACCOUNT}:table/{name}",
        ]
        for form in forms if name in every_form else forms[:1] + forms[3:4]:
            _refused(tenant, "dynamodb", {"role_arn": READER_ROLE, "table": form}, "config.table")


def test_table_arns_of_another_region_or_account_are_refused(tenant: Tenant) -> None:
    _refused(tenant, "dynamodb", {"role_arn": READER_ROLE, "table": f"arn:aws:dynamodb:eu-central-1:{SOURCE_ACCOUNT}:table/orders"},
             "config.table")
    _refused(tenant, "dynamodb", {"role_arn": READER_ROLE, "table": "arn:aws:dynamodb:us-east-1:999988887777:table/orders"},
             "config.table")


def test_platform_buckets_are_refused_in_every_form(tenant: Tenant) -> None:
    for region in ("us-east-1", "eu-central-1"):
        name = aws.bucket_name("data", region)
        for form in (name, f"arn:aws:s3:::{name}", f"s3://{name}/datasets/", f"S3://{name}",
                     f"arn:aws:s3:{region}:{PLATFORM_ACCOUNT}:accesspoint/{name}",
                     f"arn:aws:s3:{region}:{SOURCE_ACCOUNT}:accesspoint/reader",  # hides which bucket it reads
                     "reader-abcdefghijklmnopqrstuvwxyz012-s3alias", "data--use1-az4--x-s3",
                     "arn:aws:s3::123456789012:accesspoint/mfzwi23gnjvgw.mrap", f"{name}/x", name.upper()):
            _refused(tenant, "s3", {"role_arn": READER_ROLE, "bucket": form}, "config.bucket")


def test_roles_of_the_platform_account_or_without_a_role_are_refused(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    for role in (f"arn:aws:iam::{PLATFORM_ACCOUNT}:role/anything", f"arn:aws:iam::{SOURCE_ACCOUNT}:role/{settings().resource_prefix}-workers",
                 f"arn:aws:iam::{SOURCE_ACCOUNT}:user/someone", "arn:aws:iam::12345:role/x", "not-an-arn-at-all-here"):
        _refused(tenant, "s3", {"role_arn": role, "bucket": bucket}, "config.role_arn")
    _refused(tenant, "s3", {"bucket": bucket}, "config.role_arn")
    _refused(tenant, "dynamodb", {"table": "orders"}, "config.role_arn")


def test_a_canonical_source_is_stored_canonically_and_shows_the_external_id(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token,
                        {"name": "Sales", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": f"arn:aws:s3:::{bucket}"}})
        assert st == 201, conn
        assert conn["config"]["bucket"] == bucket, conn
        assert conn["status"] == "HEALTHY", conn
        assert conn["external_id"] == source_access.external_id(tenant.workspace_id)
        st, setup = call(c, "GET", "/v1/connector-access", tenant.token)
        assert st == 200
        assert setup["external_id"] == conn["external_id"]
        assert setup["trust_policy"]["Statement"][0]["Condition"] == {
            "StringEquals": {"sts:ExternalId": conn["external_id"]}}
        assert call(c, "GET", "/v1/connector-access", token_for(tenant, "member"))[0] == 403
    other = make_tenant("other-admin@example.com", name="Other")
    assert source_access.external_id(other.workspace_id) != conn["external_id"]


def test_another_workspaces_bucket_cannot_be_read(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workspace B names A's source bucket: B's sync reads as B's role, in B's account, and gets nothing."""
    monkeypatch.setenv("MOTO_S3_ALLOW_CROSSACCOUNT_ACCESS", "false")  # S3: no cross-account grant exists
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "crm/a.csv", "id,email\n1,victim@example.com\n")
    attacker = make_tenant("attacker@example.com", name="Attacker")
    attacker_role = "arn:aws:iam::444455556666:role/gateway-reader"
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", attacker.token,
                        {"name": "Theirs", "kind": "s3", "config": {"role_arn": attacker_role, "bucket": bucket}})
        assert st == 201, conn
        assert conn["status"] == "FAILING", conn
        assert "AccessDenied" in conn["health"]["last_error"], conn
        st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", attacker.token, {"mode": "FULL_REFRESH"})
        drain(attacker.region)
        st, run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", attacker.token)
    assert run["status"] == "FAILED", run
    assert "AccessDenied" in run["error"], run
    assert models.datasets(attacker.region).count(attacker.workspace_id) == 0
    assert "victim" not in json.dumps(run)


def test_another_workspaces_role_is_refused_by_its_external_id(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    """B names A's role: the platform passes B's ExternalId, and the role's trust policy (A's) refuses it.

    The emulator evaluates trust policies only when IAM enforcement is on and the role is in the caller's
    account, so this test turns enforcement on and plays the platform as an IAM user of that account."""
    attacker = make_tenant("attacker2@example.com", name="Attacker 2")
    iam = aws.client("iam", "us-east-1")
    user = iam.create_user(UserName="platform-worker")["User"]
    iam.put_user_policy(UserName="platform-worker", PolicyName="assume", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="platform-worker")["AccessKey"]
    trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": user["Arn"]}, "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"sts:ExternalId": source_access.external_id(tenant.workspace_id)}}}]}
    role = iam.create_role(RoleName="tenant-a-reader", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_SECURITY_TOKEN", raising=False)
    process_state.reset_all(derived=True)

    @set_initial_no_auth_action_count(0)
    def assume(workspace_id: str) -> Any:
        return source_access._session(role, workspace_id, tenant.region)

    try:
        assert assume(tenant.workspace_id) is not None  # A's own ExternalId: trusted
        with pytest.raises(SourceError, match="AccessDenied"):
            assume(attacker.workspace_id)  # B's ExternalId on A's role: refused by AWS (here: the emulator)
    finally:
        monkeypatch.undo()
        process_state.reset_all(derived=True)
        source_access.forget()


def test_reads_never_use_the_platform_credentials(tenant: Tenant) -> None:
    """A source in the platform's own account is invisible: the read happens in the role's account."""
    name = f"plain-{tenant.workspace_id[-8:].lower()}"
    aws.client("s3", tenant.region).create_bucket(Bucket=name)  # the platform's account, without the prefix
    aws.client("s3", tenant.region).put_object(Bucket=name, Key="x/a.csv", Body=b"id\n1\n")
    src = Src(tenant.region, tenant.workspace_id, "conn_x", {"role_arn": READER_ROLE, "bucket": name})
    s3 = source_access.client(src, "s3")
    assert s3 is not None
    owner = source_client("sts", tenant.region).get_caller_identity()["Account"]
    assert owner == SOURCE_ACCOUNT != PLATFORM_ACCOUNT
    with pytest.raises(SourceError):
        source_access.client(Src(tenant.region, tenant.workspace_id, "conn_x", {"bucket": name}), "s3")
    with pytest.raises(SourceError):
        source_access.client(Src(tenant.region, tenant.workspace_id, "conn_x",
                                 {"role_arn": f"arn:aws:iam::{PLATFORM_ACCOUNT}:role/r"}), "s3")


def test_worker_iam_policy_reads_no_source_directly() -> None:
    from infra.template import iam_policy

    for group in ("gateway", "workers"):
        statements = iam_policy(group)["Statement"]
        allowed = [(s["Action"], s.get("Resource"), s.get("NotResource")) for s in statements if s["Effect"] == "Allow"]
        for actions, resource, not_resource in allowed:
            acts = [actions] if isinstance(actions, str) else actions
            reads = [a for a in acts if a in ("s3:GetObject", "s3:ListBucket", "dynamodb:Scan", "s3:*", "dynamodb:*", "*")]
            if reads:
                own = re.compile(r"^arn:aws:(s3:::aiplat-|dynamodb:[a-z0-9*-]+:\*:table/aiplat-)")
                assert not_resource is None, (group, resource)
                assert (all(own.match(r) for r in (
                    [resource] if isinstance(resource, str) else resource))), (group, resource)
        assume = [s for s in statements if s["Effect"] == "Allow" and s["Action"] == "sts:AssumeRole"]
        assert assume
        assert assume[0]["Condition"] == {"StringLike": {"sts:ExternalId": "aiplat-ws_*"}}
        assert any(s["Effect"] == "Deny" and s["Action"] == "sts:AssumeRole" for s in statements)


# --- http: DNS rebinding and secrets in the URL -----------------------------------------------------

def test_dns_rebinding_cannot_redirect_the_request(tenant: Tenant, api: LocalApi, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attacker's DNS answers a harmless address once, then the metadata address."""
    lookups: list[str] = []
    connected: list[str] = []
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.create_connection

    def rebinding(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "api.rebind.test":
            return real_getaddrinfo(host, port, *args, **kwargs)
        answer = "127.0.0.1" if not lookups else "169.254.169.254"
        lookups.append(answer)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answer, port))]

    def recording(address: Any, *args: Any, **kwargs: Any) -> Any:
        connected.append(address[0])
        if address[0] != "127.0.0.1":
            raise OSError("unreachable in this test")
        return real_connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(socket, "create_connection", recording)
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Rebind", "kind": "http", "config": {
            "url": f"http://api.rebind.test:{api.port}/people"}})
        assert st == 201, conn
        assert conn["status"] == "HEALTHY", conn  # checked 127.0.0.1, connected to 127.0.0.1
        assert lookups == ["127.0.0.1"]
        assert connected == ["127.0.0.1"]
        _, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        drain(tenant.region)
        _, run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)
    assert run["status"] == "FAILED", run
    assert "forbidden address" in run["error"], run
    assert "169.254.169.254" not in connected  # the rebound answer was checked, never connected to


def test_a_redirect_to_the_metadata_address_is_not_followed(tenant: Tenant, api: LocalApi,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    connected: list[str] = []
    real_connect = socket.create_connection

    def recording(address: Any, *args: Any, **kwargs: Any) -> Any:
        connected.append(address[0])
        return real_connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", recording)
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Moved", "kind": "http", "config": {
            "url": f"http://127.0.0.1:{api.port}/moved"}})
        assert st == 201, conn
        assert conn["status"] != "HEALTHY", conn
        _, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        drain(tenant.region)
        _, run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)
    assert run["status"] == "FAILED", run
    assert "redirect" in run["error"], run
    assert set(connected) <= {"127.0.0.1"} and "169.254.169.254" not in connected
    assert api.paths and set(api.paths) == {"/moved"}


@pytest.mark.parametrize("address", ["169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254", "169.254.170.2",
                                     "0.0.0.0", "224.0.0.1", "fe80::1"])
def test_metadata_and_link_local_addresses_are_refused_in_every_stage(address: str) -> None:
    import ipaddress

    with pytest.raises(SourceError, match="forbidden"):
        check_address(ipaddress.ip_address(address), "h")


def test_private_addresses_are_refused_outside_the_local_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    import ipaddress

    monkeypatch.setenv("STAGE", "prod")
    settings.cache_clear()
    try:
        for address in ("127.0.0.1", "10.0.0.1", "192.168.1.1", "100.64.0.1", "::1", "::ffff:10.0.0.1"):
            with pytest.raises(SourceError):
                check_address(ipaddress.ip_address(address), "h")
        check_address(ipaddress.ip_address("93.184.216.34"), "h")
    finally:
        monkeypatch.undo()
        settings.cache_clear()


def test_secrets_in_a_connector_url_are_never_shown(tenant: Tenant, api: LocalApi) -> None:
    url = f"http://127.0.0.1:{api.port}/people?access_token=tok-s3cr3t-value&region=eu"
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Tokened", "kind": "http",
                                                                       "config": {"url": url}})
        assert st == 201, conn
        for token in (tenant.token, token_for(tenant, "member"), token_for(tenant, "viewer")):
            for path in (f"/v1/connectors/{conn['id']}", "/v1/connectors"):
                st, body = call(c, "GET", path, token)
                assert st == 200, body
                assert "tok-s3cr3t-value" not in json.dumps(body), body
        st, body = call(c, "GET", f"/v1/connectors/{conn['id']}", tenant.token)
        assert body["config"]["url"] == f"http://127.0.0.1:{api.port}/people?access_token=***&region=***"
        st, audit = call(c, "GET", f"/v1/workspaces/{tenant.workspace_id}/audit", tenant.token)
    assert "tok-s3cr3t-value" not in json.dumps(audit)
    assert public_url("https://user:pw@h.example/p?t=1#frag") == "https://h.example/p?t=***"
