"""Ill-formed Unicode in a JSON body (a lone UTF-16 surrogate, NUL, overlong or encoded-surrogate UTF-8,
NaN) is a 400 at parse on every JSON route of every group, and nothing of it is stored.

The routes are read from each group's route table (``test_json_body.json_routes``), so a route added
later is covered without edits. Before, ``"\\ud800"`` decoded to a Python string that DynamoDB and the
answer's encoder refused: 500/503 on chats, agents, workspaces, query and connectors."""
from __future__ import annotations

import json
import re

import pytest
from chalice.test import Client

from chalicelib.core.http import json_body
from chalicelib.core.http.api import JSON
from chalicelib.core.http.errors import PROBLEM_CONTENT_TYPE, ApiError
from chalicelib.groups import create_app
from tests.functional.conftest import Tenant, bearer
from tests.functional.core.test_json_body import ROUTES, own_error_shape
from tests.functional.platform import scenario

MARK = "zqmark"
FIELDS = ("name", "title", "sql", "email", "description", "message", "content", "role", "kind", "query", "q")


def _body(value: str) -> bytes:
    """Every usual field name set to ``value`` (escaped JSON text, spliced in as written)."""
    return ("{" + ",".join(f'"{f}":"{value}"' for f in FIELDS) + "}").encode()


BAD = {
    "lone_high": _body(MARK + "\\ud800"),
    "lone_low": _body(MARK + "\\udc00"),
    "reversed_pair": _body(MARK + "\\udc00\\ud800"),
    "high_then_letter": _body(MARK + "\\ud800\\u0041"),
    "in_a_key": ('{"' + MARK + '\\ud800":1,"name":"' + MARK + '"}').encode(),
    "in_an_array": ('{"messages":["' + MARK + '\\ud800"],"name":"' + MARK + '"}').encode(),
    "nul": _body(MARK + "\\u0000"),
    "overlong_utf8": _body(MARK).replace(MARK.encode(), MARK.encode() + b"\xc0\xaf"),
    "encoded_surrogate_utf8": _body(MARK).replace(MARK.encode(), MARK.encode() + b"\xed\xa0\x80"),
    "nan": b'{"name":"' + MARK.encode() + b'","limit":NaN}',
}
CODES = {"invalid_unicode", "malformed_json"}


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_parser_refuses_it(name: str) -> None:
    with pytest.raises(ApiError) as err:
        json_body.parse(BAD[name])
    assert err.value.status == 400
    assert err.value.code in CODES


def test_well_formed_text_still_parses() -> None:
    assert json_body.parse('{"a":"\\ud83d\\ude00 caf\\u00e9","b":["\\\\ud800"]}') == {"a": "\U0001f600 café",
                                                                                       "b": ["\\ud800"]}
    assert json_body.parse('"tab\\tand\\u0001"') == "tab\tand\x01"


def test_bad_unicode_is_400_on_every_json_route_and_nothing_is_stored(tenant: Tenant) -> None:
    before = scenario.snapshot()
    refused: dict[str, list[str]] = {}
    ignored: set[str] = set()
    for group in sorted({g for g, _, _ in ROUTES}):
        with Client(create_app(group)) as client:
            for _, method, path in (r for r in ROUTES if r[0] == group):
                url = re.sub(r"\{workspace_id\}", tenant.workspace_id, path)
                url = re.sub(r"\{[^}]+\}", "x", url)
                for name, body in BAD.items():
                    r = client.http.request(method, url, body=body,
                                            headers={"Content-Type": JSON, **bearer(tenant.token)})
                    where = f"{method} {path} {name}"
                    assert r.status_code < 500, (where, r.status_code, r.body[:200])
                    if r.status_code < 400:  # a route that never reads its body
                        ignored.add(f"{method} {path}")
                        continue
                    if own_error_shape(path):  # protocols that answer in their own error shape
                        assert own_error_shape(path)(json.loads(r.body)), where
                        continue
                    assert r.headers["Content-Type"] == PROBLEM_CONTENT_TYPE, where
                    problem = json.loads(r.body)
                    assert problem["status"] == r.status_code == 400 or problem["code"] not in CODES, where
                    refused.setdefault(problem["code"], []).append(where)
    # the workspace's own routes reach parsing; every route that parses refuses with the parser's codes
    assert len(refused.get("invalid_unicode", [])) >= 10 * 7, refused.keys()
    assert len(refused.get("malformed_json", [])) >= 10 * 3, refused.keys()
    assert "internal_error" not in refused and "service_unavailable" not in refused, refused.keys()
    assert len(ignored) <= 2, ignored
    for reported in ("POST /v1/chats", "POST /v1/agents", "POST /v1/query", "POST /v1/connectors",
                     "PATCH /v1/workspaces/{workspace_id}"):
        codes = {code for code, wheres in refused.items() for w in wheres if w.startswith(reported + " ")}
        assert codes == CODES, (reported, codes)
    after = scenario.snapshot()
    changed = {k: sorted(set(after[k]) - set(before[k])) if isinstance(after[k], list) else after[k]
               for k in after if after[k] != before[k]}
    assert MARK not in json.dumps(changed)
    # nothing changed, but what the two routes that ignore their body keep (a passkey sign-in challenge,
    # sign-in rate counters): sign-in state in the global store
    assert set(changed) <= {"us-east-1/auth_state"}, list(changed)
