"""The frame's workspace list, asked by the shell's server while it serves the shell.

Every page's frame lists the session's workspaces (the switcher), and the overview shows the current one
from that list. Asked by the browser, the list came only after the shell and its modules had loaded and
run: one more round trip after the page's own load (docs/webapp.md, "The first page after a restart"). Here it is the same
call the page makes (``GET /v1/workspaces?limit=200``) through the forwarder's path (``upstream.send``,
the session's access token, the platform authorising it), within a short budget; the shell writes the
answer into ``data-prefetched``, keyed by the address ``api.js`` uses, which uses it once. An answer that
is not a 200 with a JSON body, or not back in time, is left out: the page asks itself, as before.
"""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from chalicelib.core.http import outbound
from chalicelib.webapp import upstream

BUDGET_SECONDS = 1.5  # past this the shell is served without the list (the page asks itself)
TIMEOUTS = outbound.Timeouts(connect=1.0, read=BUDGET_SECONDS, total=BUDGET_SECONDS)
SEGMENTS = ["v1", "workspaces"]
QUERY = {"limit": "200"}  # as shell.js asks for it
ADDRESS = f"/api/platform/{'/'.join(SEGMENTS)}?{urlencode(QUERY)}"  # the address api.js calls for it


def answers(token: str) -> dict[str, Any]:
    """{browser address: JSON answer} of the frame's call, or {} when it did not answer 200 in time."""
    url = upstream.url_for("platform", SEGMENTS, QUERY)
    if url is None:
        return {}
    answer = upstream.send("GET", url, token, None, {"accept": "application/json"}, TIMEOUTS)
    if answer.status != 200 or answer.stream is not None:
        return {}
    try:
        return {ADDRESS: json.loads(answer.body)}
    except ValueError:
        return {}
