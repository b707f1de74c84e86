"""After an erasure no table of the workspace's region holds the erased user's address: every table declared
in ``infra/resources.py`` is scanned, whatever wrote the address (agents they edited, invitations and support
grants they made, connectors and datasets they own, chats, memberships)."""
from __future__ import annotations

import json

from chalicelib.core import audit, aws
from chalicelib.core.tenancy import get_workspace
from chalicelib.platform.support import service as support
from infra.resources import REGIONAL, tables
from tests.functional.agents.helpers import DEMO_PLAN_AGENT
from tests.functional.conftest import make_tenant
from tests.functional.gateway.data import CUSTOMER_FIELDS, put_connector, put_dataset
from tests.functional.platform.helpers import add_member, call
from tests.functional.residency.helpers import client
from tests.functional.residency.jobs import run_residency_jobs

ERIN = "Erin.Erased@example.com"


def _holding(region: str, address: str) -> dict[str, int]:
    """Per declared regional table, how many items of the region hold ``address`` (any case)."""
    needle, found = address.lower(), {}
    ddb = aws.client("dynamodb", region)
    for table in tables(REGIONAL):
        for page in ddb.get_paginator("scan").paginate(TableName=aws.table_name(table.name)):
            n = sum(needle in json.dumps(item).lower() for item in page["Items"])
            if n:
                found[table.name] = found.get(table.name, 0) + n
    return found


def test_no_table_of_the_region_holds_an_erased_address(stack: None) -> None:
    owner = make_tenant("owner@example.com", name="Erasure Co")
    ws, region = owner.workspace_id, owner.region
    erin = add_member(ws, ERIN, "admin")
    staff = make_tenant("sam@support.test", name="Support Desk")
    support.register_staff(staff.user_id, "Sam", "US")
    c = client()
    # Erin writes content the workspace keeps: an agent she created and last edited, an invitation, a
    # support grant, a chat; and owns a connector and its dataset
    status, agent, _ = call(c, "POST", "/v1/agents", erin.token, DEMO_PLAN_AGENT)
    assert status == 201, agent
    status, edited, _ = call(c, "PATCH", f"/v1/agents/{agent['id']}", erin.token, {"name": "Erin's analyst"})
    assert status == 200 and edited["updated_by"]["email"] == ERIN.lower(), edited
    # another member's run of Erin's agent keeps a snapshot of the agent (its last editor included)
    status, run, _ = call(c, "POST", f"/v1/agents/{agent['id']}/runs", owner.token,
                          {"input": {"topic": "orders", "sql": "SELECT 1"}})
    assert status == 202, run
    status, inv, _ = call(c, "POST", f"/v1/workspaces/{ws}/invitations", erin.token,
                          {"email": "newcomer@example.com", "role": "member"})
    assert status == 201, inv
    support.create(get_workspace(ws), {"support_email": staff.email, "duration": "PT4H", "reason": "ticket 9"},
                   actor=audit.Actor("user", erin.user_id, erin.email))
    status, chat, _ = call(c, "POST", "/v1/chats", erin.token,
                           {"model": "auto", "messages": [{"role": "user", "content": "Hello"}]})
    assert status in (200, 201), chat
    conn = put_connector(ws, region, "erins_crm")
    aws.client("dynamodb", region).update_item(
        TableName=aws.table_name("connectors"), Key={"workspace_id": {"S": ws}, "id": {"S": conn}},
        UpdateExpression="SET #o = :o", ExpressionAttributeNames={"#o": "owner"},
        ExpressionAttributeValues={":o": {"S": erin.email}})
    put_dataset(ws, region, "erins_customers", CUSTOMER_FIELDS, [], owner=erin.email, connector_id=conn)
    assert set(_holding(region, ERIN)) >= {"agents", "agent_runs", "invitations", "support_grants", "connectors",
                                           "datasets", "memberships"}

    status, req, _ = call(c, "POST", "/v1/access-requests", owner.token, {"kind": "erase", "user_id": erin.user_id})
    assert status == 202, req
    run_residency_jobs()
    status, done, _ = call(c, "GET", f"/v1/access-requests/{req['id']}", owner.token)
    assert done["status"] == "completed", done
    assert done["erased"]["workspaces"][ws]["attributions"] >= 6

    assert _holding(region, ERIN) == {}
    # what stays is attributed by id only: the agent, the invitation and the grant are still there
    status, kept, _ = call(c, "GET", f"/v1/agents/{agent['id']}", owner.token)
    assert status == 200 and kept["name"] == "Erin's analyst"
    assert kept["updated_by"] == {"user_id": erin.user_id, "email": None}
    status, kept_run, _ = call(c, "GET", f"/v1/agents/{agent['id']}/runs/{run['id']}", owner.token)
    assert status == 200, kept_run  # the owner's run stays
    status, invs, _ = call(c, "GET", f"/v1/workspaces/{ws}/invitations", owner.token)
    assert [i["id"] for i in invs["invitations"]] == [inv["id"]]
    assert _holding(region, "owner@example.com")  # nobody else's address went
