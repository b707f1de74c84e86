"""The OpenAI Chat Completions shapes over the grounded workspace chat (``chat.service``): requests in,
``chat.completion`` / ``chat.completion.chunk`` out, and OpenAI's error object.

Requests are checked against what the API reference defines for ``POST /v1/chat/completions``; a field it
does not define, a wrong type or an empty ``messages`` is a 400 ``invalid_request_error`` naming the field
(``param``), before anything is stored. Sampling fields (``temperature``, ``top_p``, ``max_tokens``, ...) are
accepted and checked but do not change a grounded answer. ``n`` must be 1. ``tools`` are refused
(``tools_not_supported``) unless ``tool_choice`` is ``"none"``: the answer is always the workspace chat's,
never a call of a client-defined function. Message content may be a string or a list of ``text`` parts;
``developer`` counts as ``system``; ``tool`` messages and images are refused.

The reply is the chat's answer: ``content`` holds the inline ``[n]`` markers, and the extension fields
``citations`` (each verified against its stored passage), ``grounding``, ``chat_id``, ``region`` and
``routing`` sit beside OpenAI's own fields, which clients ignore or expose as extra fields. ``origin`` is
``general`` for an answer from the model's general knowledge, not from the workspace's sources (allowed by
the extension request field ``mode: general_allowed`` where the workspace allows it, ``chat/modes.py``),
with ``notice`` saying so; ``sources`` otherwise.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from chalicelib.core.http.errors import ApiError

_NUMBER = (int, float)
# field -> (types, check) for the accepted OpenAI fields beyond model, messages, stream, tools
_SAMPLING: dict[str, tuple[tuple[type, ...], Any]] = {
    "temperature": (_NUMBER, lambda v: 0 <= v <= 2),
    "top_p": (_NUMBER, lambda v: 0 <= v <= 1),
    "presence_penalty": (_NUMBER, lambda v: -2 <= v <= 2),
    "frequency_penalty": (_NUMBER, lambda v: -2 <= v <= 2),
    "max_tokens": ((int,), lambda v: v >= 1),
    "max_completion_tokens": ((int,), lambda v: v >= 1),
    "n": ((int,), lambda v: v == 1),
    "seed": ((int,), lambda v: True),
    "user": ((str,), lambda v: len(v) <= 256),
    "stop": ((str, list), lambda v: isinstance(v, str) or (len(v) <= 4 and all(isinstance(s, str) for s in v))),
    "parallel_tool_calls": ((bool,), lambda v: True),
    "logprobs": ((bool,), lambda v: v is False),
    "store": ((bool,), lambda v: True),
    "metadata": ((dict,), lambda v: len(v) <= 16 and all(isinstance(x, str) for x in v.values())),
}
FIELDS = {"model", "messages", "stream", "stream_options", "tools", "tool_choice", "mode", *_SAMPLING}  # mode: ours
ROLE_MAP = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


def invalid(message: str, param: str | None, code: str = "invalid_value", status: int = 400) -> ApiError:
    """A 400 in OpenAI's shape (``openai_error`` renders ``param`` and ``code``)."""
    return ApiError(status, code, message, extra={"param": param})


def _is(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def _content(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        texts = []
        for i, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise invalid("Only text content parts are supported.", f"{where}.content[{i}]")
            texts.append(part["text"])
        return "\n".join(texts)
    raise invalid("content must be a string or a list of text parts.", f"{where}.content", "invalid_type")


def _messages(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list):
        raise invalid("messages must be an array.", "messages", "invalid_type")
    if not value:
        raise invalid("messages must not be empty.", "messages", "empty_array")
    out = []
    for i, m in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise invalid("Each message must be an object.", where, "invalid_type")
        unknown = sorted(set(m) - {"role", "content", "name"})
        if unknown:
            raise invalid(f"Unrecognized message field: {unknown[0][:64]}.", f"{where}.{unknown[0][:64]}",
                          "unknown_parameter")
        role = m.get("role")
        if not isinstance(role, str) or role not in ROLE_MAP:  # an object or array is no role (and unhashable)
            raise invalid("role must be system, developer, user or assistant (tool messages need tools, which are "
                          "not supported).", f"{where}.role")
        out.append({"role": ROLE_MAP[role], "content": _content(m.get("content"), where)})
    return out


def chat_request(body: Any) -> tuple[dict[str, Any], bool]:
    """The ``/v1/chats`` body for an OpenAI request, and whether usage is sent at the end of a stream."""
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.", None, "invalid_type")
    unknown = sorted(str(k) for k in body if k not in FIELDS)
    if unknown:
        raise invalid(f"Unrecognized request argument supplied: {unknown[0][:64]}", unknown[0][:64],
                      "unknown_parameter")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model is required: an id from GET /v1/models, or 'auto'.", "model",
                      "missing_required_parameter" if model is None else "invalid_type")
    messages = _messages(body.get("messages"))
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise invalid("stream must be a boolean.", "stream", "invalid_type")
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or set(options) - {"include_usage"}
                                or not isinstance(options.get("include_usage", False), bool)):
        raise invalid("stream_options may only hold include_usage (a boolean).", "stream_options")
    for name, (types, check) in _SAMPLING.items():
        if name in body and body[name] is not None and not (_is(body[name], types) and check(body[name])):
            raise invalid(f"{name} has an invalid type or value.", name)
    _tools(body.get("tools"), body.get("tool_choice"))
    out = {"model": model, "messages": messages, "stream": bool(stream)}
    if body.get("mode") is not None:  # an extension: knowledge or general_allowed (chat/modes.py)
        out["mode"] = body["mode"]
    return out, bool((options or {}).get("include_usage"))


def _tools(tools: Any, choice: Any) -> None:
    if tools is not None and not isinstance(tools, list):
        raise invalid("tools must be an array.", "tools", "invalid_type")
    if choice is not None and choice not in ("none", "auto", "required") and not isinstance(choice, dict):
        raise invalid("tool_choice must be none, auto, required or an object.", "tool_choice")
    if (tools or (choice not in (None, "none", "auto"))) and choice != "none":
        raise invalid("This endpoint answers from the workspace's own data and does not call client-defined tools: "
                      "omit tools, or send tool_choice \"none\".", "tools", "tools_not_supported")


def _created(reply: dict[str, Any]) -> int:
    return int(datetime.fromisoformat(reply["created_at"].replace("Z", "+00:00")).timestamp())


def _extensions(reply: dict[str, Any]) -> dict[str, Any]:
    return {"citations": reply["citations"], "grounding": reply["grounding"], "chat_id": reply["chat_id"],
            "region": reply["region"], "routing": reply["routing"], "provider": reply["provider"],
            "kind": reply["kind"], "origin": reply.get("origin", "sources"),
            **({"notice": reply["notice"]} if "notice" in reply else {})}


def _usage(reply: dict[str, Any]) -> dict[str, int]:
    i, o = int(reply["usage"]["input_tokens"]), int(reply["usage"]["output_tokens"])
    return {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}


def completion(reply: dict[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` object for a chat reply."""
    return {"id": "chatcmpl-" + reply["id"], "object": "chat.completion", "created": _created(reply),
            "model": reply["model"], "system_fingerprint": None,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply["message"]["content"],
                                                 "refusal": None},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": _usage(reply), **_extensions(reply)}


def chunks(reply: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` events of a reply: the role, the content in line-sized pieces, the finish
    (carrying the extension fields), and the usage chunk when asked for."""
    base = {"id": "chatcmpl-" + reply["id"], "object": "chat.completion.chunk", "created": _created(reply),
            "model": reply["model"], "system_fingerprint": None}
    content = reply["message"]["content"]
    pieces = [p for p in content.splitlines(keepends=True) if p]
    out = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                 "finish_reason": None}]}]
    out += [{**base, "choices": [{"index": 0, "delta": {"content": p}, "logprobs": None, "finish_reason": None}]}
            for p in pieces]
    out.append({**base, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}],
                **_extensions(reply)})
    if include_usage:
        out.append({**base, "choices": [], "usage": _usage(reply)})
    return out


def encode_sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"data: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events) + "data: [DONE]\n\n"


# --- errors -----------------------------------------------------------------------------------------------

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 409: "conflict_error", 413: "invalid_request_error", 415: "invalid_request_error",
          421: "invalid_request_error", 422: "invalid_request_error", 429: "rate_limit_error"}
# platform codes whose OpenAI counterpart has another status or code
_REMAP = {"unknown_model": (404, "model_not_found", "model"), "invalid_token": (401, "invalid_api_key", None),
          "validation_failed": (400, "invalid_value", None)}


def error_body(err: ApiError, correlation_id: str) -> tuple[int, dict[str, Any]]:
    """OpenAI's error object for ``err``: ``{"error": {"message", "type", "param", "code"}}`` (and the platform's
    ``correlation_id``; a 421 keeps the addresses of the region serving the workspace)."""
    status, code, param = _REMAP.get(err.code, (err.status, err.code, None))
    param = err.extra.get("param", param)
    if err.code == "validation_failed" and err.errors:
        param = err.errors[0].get("field")
    message = err.detail
    if err.errors:
        message += " " + "; ".join(f"{e.get('field')}: {e.get('message')}" for e in err.errors[:5])
    error = {"message": message, "type": _TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error"),
             "param": param, "code": code}
    extra = {k: v for k, v in err.extra.items() if k != "param"}
    return status, {"error": {**error, **extra, "correlation_id": correlation_id}}
