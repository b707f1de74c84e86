"""MCP's JSON-RPC exchange over Streamable HTTP, stateless and answered as JSON, in both protocol eras.

One POST carries one JSON-RPC message and gets one answer; no ``Mcp-Session-Id`` is issued or read, so
any Lambda container answers any request (docs/decisions.md, "MCP server").

* **2026-07-28** (stateless): every request carries ``_meta`` with the protocol version and the client's
  capabilities (and optionally its info); the ``MCP-Protocol-Version``, ``Mcp-Method`` and (for
  ``tools/call``) ``Mcp-Name`` headers must equal the body (``-32020`` otherwise); ``server/discover``
  advertises the versions and capabilities. Errors carry the HTTP statuses the revision assigns.
* **2025-11-25 and older** (handshake): ``initialize`` negotiates a version (the client's when we speak
  it, else 2025-11-25), ``notifications/initialized`` is acknowledged, later requests name the version in
  ``MCP-Protocol-Version`` (2025-03-26 when absent). Nothing is remembered between requests.

Requests are validated and results shaped with the ``mcp-types`` package (the official SDK's wire types),
per version: a result is reduced to what the negotiated revision defines.
"""
from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types
from mcp_types import jsonrpc
from mcp_types import methods as wire
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from chalicelib.core.authz import Principal
from chalicelib.core.http import json_body
from chalicelib.core.http.errors import ApiError
from chalicelib.gateway.mcp import tools

log = logging.getLogger("aiplat-svc.mcp")
SERVER_INFO = {"name": "aiplat-gateway", "title": "AI platform data gateway", "version": "1.0.0"}
LEGACY_VERSIONS = tuple(v for v in HANDSHAKE_PROTOCOL_VERSIONS if v >= "2025-03-26")  # what we negotiate
ASSUMED_LEGACY = "2025-03-26"  # Streamable HTTP: a request without MCP-Protocol-Version
SUPPORTED = (*MODERN_PROTOCOL_VERSIONS, *reversed(LEGACY_VERSIONS))
INSTRUCTIONS = ("Your workspace's data under your own access rights: search datasets, read a dataset's schema and "
                "lineage, run read-only SQL (masked fields stay masked), search documents for verified passages, "
                "and list connectors. Every call is audited.")
LEGACY_METHODS = ("initialize", "ping", "tools/list", "tools/call")
MODERN_METHODS = ("server/discover", "tools/list", "tools/call")
PROTOCOL_HEADER, METHOD_HEADER, NAME_HEADER = "mcp-protocol-version", "mcp-method", "mcp-name"
# HTTP status of a JSON-RPC error on the 2026-07-28 wire (its transport section); other codes answer 200
MODERN_STATUS = {jsonrpc.PARSE_ERROR: 400, jsonrpc.INVALID_REQUEST: 400, jsonrpc.INVALID_PARAMS: 400,
                 jsonrpc.HEADER_MISMATCH: 400, jsonrpc.UNSUPPORTED_PROTOCOL_VERSION: 400,
                 jsonrpc.METHOD_NOT_FOUND: 404}


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@dataclass
class Answer:
    """What the HTTP layer sends: a status and a JSON-RPC message (None: 202 with no body)."""

    status: int
    message: dict[str, Any] | None
    protocol_version: str | None = None


@dataclass
class Call:
    """One validated request."""

    id: str | int
    method: str
    params: dict[str, Any]
    version: str
    modern: bool
    client: str


def _error(request_id: Any, err: RpcError, modern: bool) -> Answer:
    status = MODERN_STATUS.get(err.code, 200) if modern else (400 if err.code in (
        jsonrpc.PARSE_ERROR, jsonrpc.INVALID_REQUEST) else 200)
    error: dict[str, Any] = {"code": err.code, "message": err.message}
    if err.data is not None:
        error["data"] = err.data
    return Answer(status, {"jsonrpc": "2.0", "id": request_id, "error": error})


def _decode_header(value: str | None) -> str | None:
    """A routing header's value; ``=?base64?...?=`` carries a value that is not plain ASCII."""
    if value is None or not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    try:
        return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _envelope(raw: bytes) -> dict[str, Any]:
    try:
        message = json_body.parse(raw)
    except ApiError:
        raise RpcError(jsonrpc.PARSE_ERROR, "The body is not a JSON document (or is nested too deeply).") from None
    if isinstance(message, list):
        raise RpcError(jsonrpc.INVALID_REQUEST, "JSON-RPC batches are not supported: send one message per request.")
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise RpcError(jsonrpc.INVALID_REQUEST, "The body must be one JSON-RPC 2.0 message.")
    return message


def _modern_call(request_id: Any, method: str, params: dict[str, Any], headers: Mapping[str, str]) -> Call:
    """The 2026-07-28 checks, in the revision's order: envelope, routing headers, version."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or any(k not in meta for k in (
            mcp_types.PROTOCOL_VERSION_META_KEY, mcp_types.CLIENT_CAPABILITIES_META_KEY)):
        raise RpcError(jsonrpc.INVALID_PARAMS, "params._meta must carry the protocol version and the client's "
                                               "capabilities.")
    version = meta[mcp_types.PROTOCOL_VERSION_META_KEY]
    if headers.get(PROTOCOL_HEADER) != version:
        raise RpcError(jsonrpc.HEADER_MISMATCH, "The MCP-Protocol-Version header does not match _meta.")
    if headers.get(METHOD_HEADER) != method:
        raise RpcError(jsonrpc.HEADER_MISMATCH, "The Mcp-Method header does not match the method.")
    if method == "tools/call" and params.get("name") is not None and \
            _decode_header(headers.get(NAME_HEADER)) != params.get("name"):
        raise RpcError(jsonrpc.HEADER_MISMATCH, "The Mcp-Name header does not match the tool name.")
    if version not in MODERN_PROTOCOL_VERSIONS:
        raise RpcError(jsonrpc.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version.",
                       {"supported": list(SUPPORTED), "requested": str(version)[:64]})
    info = meta.get(mcp_types.CLIENT_INFO_META_KEY)
    client = str(info.get("name", ""))[:100] if isinstance(info, dict) else ""
    return Call(request_id, method, params, version, True, client)


def _legacy_call(request_id: Any, method: str, params: dict[str, Any], headers: Mapping[str, str]) -> Call:
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in LEGACY_VERSIONS else LATEST_HANDSHAKE_VERSION
        info = params.get("clientInfo")
        client = str(info.get("name", ""))[:100] if isinstance(info, dict) else ""
        return Call(request_id, method, params, version, False, client)
    version = headers.get(PROTOCOL_HEADER) or ASSUMED_LEGACY
    if version not in LEGACY_VERSIONS:
        raise RpcError(jsonrpc.INVALID_REQUEST, "Unsupported MCP-Protocol-Version.",
                       {"supported": list(SUPPORTED), "requested": version[:64]})
    return Call(request_id, method, params, version, False, (headers.get("user-agent") or "")[:100])


def is_discovery(raw: bytes) -> bool:
    """Whether ``raw`` is one ``server/discover`` request: the only method answered without a principal."""
    try:
        message = _envelope(raw)
    except RpcError:
        return False
    return message.get("method") == "server/discover" and "id" in message


def handle(raw: bytes, headers: Mapping[str, str], principal: Principal | None, request: Any, caller: Any) -> Answer:
    """Answer one POST to the MCP endpoint as ``principal`` (already authorized; None only for a discovery)."""
    modern = headers.get(PROTOCOL_HEADER) in MODERN_PROTOCOL_VERSIONS
    try:
        message = _envelope(raw)
    except RpcError as err:
        return _error(None, err, modern)
    if "method" not in message or "id" not in message:
        return Answer(202, None)  # a response or a notification (notifications/initialized): nothing to answer
    request_id = message["id"]
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return _error(None, RpcError(jsonrpc.INVALID_REQUEST, "id must be a string or an integer."), modern)
    method, params = message.get("method"), message.get("params", {})
    if not isinstance(method, str) or not isinstance(params, dict):
        return _error(request_id, RpcError(jsonrpc.INVALID_REQUEST, "method must be a string and params an "
                                                                    "object."), modern)
    meta = params.get("_meta")
    modern = modern or method == "server/discover" or (
        isinstance(meta, dict) and mcp_types.PROTOCOL_VERSION_META_KEY in meta)
    try:
        call = (_modern_call if modern else _legacy_call)(request_id, method, params, headers)
        if method not in (MODERN_METHODS if modern else LEGACY_METHODS):
            raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method[:64]}")
        try:
            wire.validate_client_request(method, call.version, params)
        except (ValidationError, KeyError):
            raise RpcError(jsonrpc.INVALID_PARAMS, f"The params of {method} are not valid.") from None
        result = _dispatch(call, principal, request, caller)
    except RpcError as err:
        return _error(request_id, err, modern)
    shaped = wire.serialize_server_result(method, call.version, result)
    if modern:
        shaped["_meta"] = {**shaped.get("_meta", {}), mcp_types.SERVER_INFO_META_KEY: SERVER_INFO}
    return Answer(200, {"jsonrpc": "2.0", "id": request_id, "result": shaped}, call.version)


def _capabilities() -> dict[str, Any]:
    return {"tools": {"listChanged": False}}


def _dispatch(call: Call, principal: Principal | None, request: Any, caller: Any) -> dict[str, Any]:
    if call.method == "server/discover":
        return {"supportedVersions": list(SUPPORTED), "capabilities": _capabilities(), "instructions": INSTRUCTIONS,
                "ttlMs": 0, "cacheScope": "private", "resultType": "complete"}
    if principal is None:
        raise RpcError(jsonrpc.INVALID_REQUEST, "Only server/discover is answered without a token.")
    if call.method == "initialize":
        return {"protocolVersion": call.version, "capabilities": _capabilities(), "serverInfo": SERVER_INFO,
                "instructions": INSTRUCTIONS}
    if call.method == "ping":
        return {}
    if call.method == "tools/list":  # the caller's tools depend on their live role: never cached or shared
        out: dict[str, Any] = {"tools": [tools.listing(t) for t in tools.offered(principal)]}
        if call.modern:
            out.update({"ttlMs": 0, "cacheScope": "private", "resultType": "complete"})
        return out
    return _call_tool(call, principal, request, caller)


def _tool_result(payload: dict[str, Any], is_error: bool, modern: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [{"type": "text", "text": json.dumps(payload, separators=(",", ":"),
                                                                           default=str)}],
                           "structuredContent": payload, "isError": is_error}
    if modern:
        out["resultType"] = "complete"
    return out


def _call_tool(call: Call, principal: Principal, request: Any, caller: Any) -> dict[str, Any]:
    name, arguments = call.params.get("name"), call.params.get("arguments") or {}
    tool = tools.BY_NAME.get(name) if isinstance(name, str) else None
    if tool is None or tool not in tools.offered(principal):
        if tool is not None:  # a tool the role may not call: audited, answered as an unknown tool
            tools.record(tool, principal, None, ApiError(403, "forbidden", ""), call.version, call.client, caller)
        raise RpcError(jsonrpc.INVALID_PARAMS, "Unknown tool.")
    if not isinstance(arguments, dict):
        raise RpcError(jsonrpc.INVALID_PARAMS, "arguments must be an object.")
    try:
        answer = tools.call(tool, arguments, principal, request)
    except ApiError as err:
        if err.status >= 500:
            log.error("tool failed", extra={"tool": tool.name, "code": err.code})
        tools.record(tool, principal, None, err, call.version, call.client, caller)
        problem = {"code": err.code, "status": err.status, "detail": err.detail}
        if err.errors:
            problem["errors"] = err.errors
        return _tool_result(problem, True, call.modern)
    recorded = tools.record(tool, principal, answer, None, call.version, call.client, caller)
    result = _tool_result(answer, False, call.modern)
    result["_meta"] = {"aiplat/call": recorded}  # the audited call: its id, datasets, rows and correlation id
    return result
