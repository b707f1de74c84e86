"""A requests transport adapter that sends to a Chalice test client, so a real HTTP client library
(authlib's requests session) can talk to our routes without a network server."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict


class ChaliceAdapter(BaseAdapter):
    def __init__(self, client: Any) -> None:
        super().__init__()
        self.client = client

    def send(self, request: requests.PreparedRequest, **_: Any) -> requests.Response:  # type: ignore[override]
        url = urlsplit(request.url)
        path = url.path + (f"?{url.query}" if url.query else "")
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode()
        r = self.client.http.request(request.method, path, headers=dict(request.headers), body=body)
        response = requests.Response()
        response.status_code = r.status_code
        response._content = r.body
        response.headers = CaseInsensitiveDict(r.headers)
        response.url = request.url
        response.request = request
        response.encoding = "utf-8"
        return response

    def close(self) -> None:
        pass
