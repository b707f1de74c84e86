"""Tracing overhead: a chat round trip (extractive provider, retrieval, storage) and a federated query through
the app, each without an OTLP endpoint (no SDK loaded) and with one (the SDK, a batch processor exporting
over OTLP/HTTP to a loopback collector stub that answers 200), alternated request by request. Also the spans
one request produces, and what loading the tracing module costs without an endpoint. In-process, moto."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.common import use_emulator

use_emulator()

N = int(os.environ.get("BENCH_TELEMETRY_N", "40"))


class _Stub(BaseHTTPRequestHandler):
    received = 0

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Stub.received += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    from moto import mock_aws

    with mock_aws():
        _run()


def _run() -> None:
    from chalice.test import Client
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from bench.common import quiet
    from chalicelib.core.telemetry import tracing
    from chalicelib.groups import create_app
    from chalicelib.knowledge import indexer
    from infra.bootstrap import bootstrap_all
    from tests.functional.conftest import bearer, make_tenant
    from tests.functional.gateway.data import field, token_for
    from tests.functional.knowledge.helpers import put_keyed

    bootstrap_all()
    t = make_tenant("bench-telemetry@example.com", name="Bench")
    ds = put_keyed(t.workspace_id, t.region, "handbook", [field("topic"), field("body")], [
        ("vacation", "Employees get thirty vacation days per year. Unused days expire in March."),
        ("travel", "Travel is booked through the travel desk. Economy class is the default.")])
    indexer.index_dataset(t.region, t.workspace_id, ds)
    member = token_for(t.workspace_id, "member").token
    headers = {**bearer(member), "Content-Type": "application/json"}
    chat_body = json.dumps({"model": "auto", "messages": [{"role": "user", "content": "How many vacation days?"}]})
    query_body = json.dumps({"sql": "SELECT topic, body FROM handbook"})
    stub = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{stub.server_address[1]}/v1/traces"

    platform, gateway = Client(create_app("platform")), Client(create_app("gateway"))

    def chat() -> None:
        assert platform.http.post("/v1/chats", headers=headers, body=chat_body).status_code == 201

    def query() -> None:
        assert gateway.http.post("/v1/query", headers=headers, body=query_body).status_code == 200

    # one provider exporting for the whole run, switched in and out request by request (as configured once
    # from OTEL_EXPORTER_OTLP_ENDPOINT in a deployment)
    exporting = tracing._new_provider(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=5)))
    tracing.use_processor(None)
    rows = []
    with quiet():
        for name, fn in (("chat (POST /v1/chats)", chat), ("query (POST /v1/query)", query)):
            off: list[float] = []
            on: list[float] = []
            for _ in range(5):
                fn()  # warm: indexes, snapshots, caches
            for i in range(N):
                for mode in (("off", "on") if i % 2 == 0 else ("on", "off")):
                    tracing._state["provider"] = exporting if mode == "on" else None
                    t0 = time.perf_counter()
                    fn()
                    (on if mode == "on" else off).append((time.perf_counter() - t0) * 1000)
            p50_off, p50_on = statistics.median(off), statistics.median(on)
            rows.append(f"| {name} | {p50_off:.2f} | {p50_on:.2f} | {p50_on - p50_off:+.2f} "
                        f"({(p50_on / p50_off - 1) * 100:+.1f}%) |")
        tracing._state["provider"] = None
        exporting.shutdown()
        memory = InMemorySpanExporter()
        tracing.use_processor(SimpleSpanProcessor(memory))
        chat()
        spans_chat = len(memory.get_finished_spans())
        memory.clear()
        query()
        spans_query = len(memory.get_finished_spans())
        tracing.use_processor(None)
    stub.shutdown()
    code = ("import sys;from chalicelib.groups import create_app;create_app('platform');create_app('gateway');"
            "print(sum(1 for n in sys.modules if n.startswith(('opentelemetry', 'openlineage'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENLINEAGE"))}
                            ).stdout.split()[-1]

    print(f"### Tracing overhead ({N} requests each way, alternated; p50 ms)\n")
    print("| request | no endpoint | OTLP endpoint (batch export to a loopback stub) | difference |")
    print("|---|---:|---:|---:|")
    print("\n".join(rows))
    print(f"\nSpans per request with tracing on: chat {spans_chat}, query {spans_query}; the stub received "
          f"{_Stub.received} export requests. OpenTelemetry and OpenLineage modules imported by the platform and "
          f"gateway apps without an endpoint: {loaded}.\n")
