"""A scripted OpenAI-compatible model on loopback for agent runs (a test double of the model only): it
answers ``/v1/chat/completions`` with the next scripted turn as native ``tool_calls`` (``{"tool": name,
"input": {...}}``, ``{"calls": [...]}`` for several, ``{"raw": "<arguments text>"}`` for malformed
arguments) or as text (``{"answer": text}``); a turn may be a function of the request it answers. It
records every request it received."""
from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.local_http import send_body, serve, stop, url_of


def message(turn: dict[str, Any]) -> dict[str, Any]:
    """One scripted turn as an OpenAI chat-completion message."""
    if "answer" in turn:
        return {"role": "assistant", "content": turn["answer"]}
    calls = turn["calls"] if "calls" in turn else [turn]
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{n}", "type": "function",
         "function": {"name": c["tool"], "arguments": c["raw"] if "raw" in c else json.dumps(c.get("input", {}))}}
        for n, c in enumerate(calls)]}


class ScriptedModel:
    def __init__(self, turns: list[dict[str, Any]]) -> None:
        self.turns = list(turns)
        self.requests: list[dict[str, Any]] = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                script.requests.append(body)
                turn = script.turns.pop(0) if script.turns else {"answer": "out of script"}
                turn = turn(body) if callable(turn) else turn  # a turn may depend on what the model was sent
                send_body(self, {"choices": [{"message": message(turn), "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": 50, "completion_tokens": 10}})

        self.httpd = serve(Handler)
        self.url = url_of(self.httpd)

    def close(self) -> None:
        stop(self.httpd)
