"""A scripted OpenAI-compatible model on loopback for agent runs (a test double of the model only): it
answers ``/v1/chat/completions`` with the next scripted turn as native ``tool_calls`` (``{"tool": name,
"input": {...}}``, ``{"calls": [...]}`` for several, ``{"raw": "<arguments text>"}`` for malformed
arguments) or as text (``{"answer": text}``); a turn may be a function of the request it answers. It
records every request it received."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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
                out = json.dumps({"choices": [{"message": message(turn), "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 50, "completion_tokens": 10}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
