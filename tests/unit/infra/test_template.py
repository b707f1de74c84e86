"""API Gateway's own answers in the packaged templates (``infra/template.py``, ``gateway_responses``): the
app group's unknown address is the app's HTML 404 page under a CSP API Gateway can carry; every JSON API
keeps its 404 problem+json. (``tests/integration/infra/test_packaging.py`` merges them with ``chalice
package`` and runs cfn-lint.)"""
from __future__ import annotations

import json
import re

import pytest

from chalicelib.groups import HTTP_GROUPS
from chalicelib.webapp import pages
from infra.template import (
    API_ORIGIN,
    APP_NOT_FOUND_TYPES,
    CHALICE_DIR,
    STAGE_ENVS,
    gateway_responses,
    gateway_responses_file,
    package_args,
    public_urls,
    stages,
)

# an API Gateway static header value: one pair of single quotes around text holding none
STATIC = re.compile(r"^'[^']*'$")


def _by_type(fragment: dict) -> dict[str, dict]:
    return {r["Properties"]["ResponseType"]: r["Properties"] for r in fragment["Resources"].values()}


@pytest.mark.parametrize("env", STAGE_ENVS)
def test_app_unknown_address_is_the_html_404_page(env: str) -> None:
    responses = _by_type(gateway_responses("app", env))
    _, local_headers, local_body = pages.deep_not_found_page(["http://127.0.0.1:8003"])
    for response_type in APP_NOT_FOUND_TYPES:
        props = responses[response_type]
        assert props["StatusCode"] == "404"
        assert props["RestApiId"] == {"Ref": "RestAPI"}
        params = props["ResponseParameters"]
        assert params["gatewayresponse.header.Content-Type"] == "'text/html; charset=utf-8'"
        assert params["gatewayresponse.header.X-Correlation-Id"] == "context.requestId"
        assert params["gatewayresponse.header.X-Frame-Options"] == "'DENY'"
        assert params["gatewayresponse.header.Cache-Control"] == "'no-store'"
        for name, value in params.items():  # every static value is one quoted string API Gateway accepts
            text = value["Fn::Sub"] if isinstance(value, dict) else value
            assert value == "context.requestId" or STATIC.match(text), (name, value)
        # the same page the local server shows; rendered verbatim by API Gateway's Velocity engine
        for body in props["ResponseTemplates"].values():
            assert body == local_body
            assert "$" not in body
            assert "#" not in body
            assert "<h1>Page not found</h1>" in body
            assert "<script" not in body
            assert "style=" not in body
        assert set(props["ResponseTemplates"]) == {"text/html", "application/json"}


@pytest.mark.parametrize("env", STAGE_ENVS)
def test_app_404_csp_is_strict_without_quoted_keywords(env: str) -> None:
    params = _by_type(gateway_responses("app", env))["MISSING_AUTHENTICATION_TOKEN"]["ResponseParameters"]
    csp = params["gatewayresponse.header.Content-Security-Policy"]["Fn::Sub"].strip("'")
    directives = {d.split()[0]: d.split()[1:] for d in csp.split("; ")}
    assert directives["sandbox"] == []  # no allow-scripts, allow-forms or allow-same-origin
    origins = [public_urls(env)["app_url"], API_ORIGIN]
    for name in ("default-src", "form-action", "frame-ancestors", "base-uri"):
        assert directives[name] == origins, name
    assert not any(k.startswith(("script-src", "style-src")) for k in directives)  # default-src governs both
    assert "unsafe" not in csp
    assert "*" not in csp
    assert "data:" not in csp
    # Fn::Sub fills only the API's own id, region and domain suffix
    assert set(re.findall(r"\$\{([^}]+)\}", csp)) == {"RestAPI", "AWS::Region", "AWS::URLSuffix"}


def test_quote_free_csp_refuses_a_source_that_would_break_the_header() -> None:
    for bad in ([], ["'self'"], ["https://a.example; script-src *"], ["https://a.example,https://b.example"]):
        with pytest.raises(ValueError):
            pages.quote_free_csp(bad)


def test_json_apis_keep_their_404_problem() -> None:
    """Only the app's stages merge the HTML page: the JSON APIs answer problem+json with the request
    ID, and echo no request header (no ``method.request`` mapping, no API Gateway message)."""
    for stage, group, _ in stages():
        env = stage.rsplit("-", 1)[1]
        if group not in HTTP_GROUPS:
            assert package_args(stage) == ""
            continue
        assert package_args(stage) == f"--merge-template .chalice/{gateway_responses_file(group, env)}"
        if group == "app":
            continue
        responses = _by_type(gateway_responses())
        assert gateway_responses_file(group, env) == "gateway-responses.json"
        for response_type in APP_NOT_FOUND_TYPES:
            props = responses[response_type]
            assert props["StatusCode"] == "404"
            params = props["ResponseParameters"]
            assert params["gatewayresponse.header.Content-Type"] == "'application/problem+json'"
            assert params["gatewayresponse.header.X-Correlation-Id"] == "context.requestId"
            assert "gatewayresponse.header.Content-Security-Policy" not in params
            assert not any("method.request" in str(v) for v in params.values())
            problem = json.loads(props["ResponseTemplates"]["application/json"])
            assert problem["status"] == 404
            assert problem["code"] == "not_found"
            assert problem["correlation_id"] == "$context.requestId"
    # the app's other answers (throttling, too large, ...) stay problem+json too
    app = _by_type(gateway_responses("app", "dev"))
    assert app["THROTTLED"] == _by_type(gateway_responses())["THROTTLED"]


def test_committed_app_gateway_responses_are_current() -> None:
    for env in STAGE_ENVS:
        committed = json.loads((CHALICE_DIR / gateway_responses_file("app", env)).read_text())
        assert committed == gateway_responses("app", env), "run `make templates` to refresh the gateway responses"
