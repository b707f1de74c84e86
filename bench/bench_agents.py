"""Agent runs: runs per second through the queue and the worker (the demo's declared-plan agent: catalog
search, schema, federated query, memory write, then the extractive answer) beside the bare cost of the same
four tool calls made directly; the per-step overhead of the ledger, heartbeat and events (a plan of cheap
memory reads against the same reads made directly); and the time from POST to ``completed`` (p50/p99)
under ``make run``'s worker loop (``infra/local_run.py``, emulator over HTTP) beside the worker's own time
for a run."""
from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections import Counter
from typing import Any

from bench.common import use_emulator

RUNS = int(os.environ.get("BENCH_AGENT_RUNS", "20"))
LATENCY_RUNS = int(os.environ.get("BENCH_AGENT_LATENCY_RUNS", "20"))
CHEAP_STEPS = 10
ROUNDS = int(os.environ.get("BENCH_AGENT_ROUNDS", "7"))
POLLER = ("sqs ReceiveMessage", "sqs DeleteMessage")  # the queue's poller's calls (Lambda's, not the function's)


def _env() -> None:
    use_emulator()


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def _in_process() -> list[str]:
    from chalice.test import Client
    from moto import mock_aws

    from chalicelib.agents import demo as agents_demo
    from chalicelib.agents import tools
    from chalicelib.agents.runtime import worker
    from chalicelib.core import aws, clock, process_state
    from chalicelib.core.authz import Principal
    from chalicelib.core.config import settings
    from chalicelib.gateway import demo
    from chalicelib.groups import create_app
    from chalicelib.identity import users
    from chalicelib.identity.oauth.signing import issue_access_token
    from chalicelib.platform.workspaces.service import create_workspace
    from infra.bootstrap import bootstrap_all
    from infra.local.workers import sqs_event
    from tests.functional.aws_calls import counting

    settings.cache_clear()
    process_state.reset_all(derived=True)
    lines: list[str] = []
    with mock_aws():
        bootstrap_all()
        region = "us-east-1"
        user = users.create_user("bench-agents@example.com", email_verified=True)
        ws = create_workspace(owner_id=user.id, owner_email=user.email, name="Bench agents", residency="us-east",
                              enforce_mfa=False)
        demo.seed(ws.id, region, user.email)
        agent_id = agents_demo.seed(ws.id, region, user.id, user.email)["agent_id"]
        token, _ = issue_access_token(user_id=user.id, email=user.email, workspace_id=ws.id, roles=["admin"],
                                      amr=["pwd", "otp", "mfa"], ttl=24 * 3600)
        auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        client = Client(create_app("platform"))
        sqs = aws.client("sqs", region)
        url = aws.queue_url("agent-runs", region)
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

        def drain() -> None:
            while True:
                msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"],
                                           MessageAttributeNames=["All"]).get("Messages", [])
                if not msgs:
                    return
                result = worker.handle(sqs_event(msgs, region, arn))
                assert not result["batchItemFailures"], result
                for m in msgs:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

        def through_queue(agent: str, body: str, n: int) -> float:
            t0 = time.perf_counter()
            for _ in range(n):
                r = client.http.post(f"/v1/agents/{agent}/runs", headers=auth, body=body)
                assert r.status_code == 202, r.body
                drain()
            return time.perf_counter() - t0

        principal = Principal(user_id=user.id, workspace_id=ws.id, roles=("admin",), email=user.email,
                                     amr=("bench",), token_id="bench")
        plan = agents_demo.DEMO_AGENT["plan"]

        def bare_tools(n: int) -> float:
            ctx = tools.ToolContext(principal, region, agent_id, "run_bench")
            t0 = time.perf_counter()
            for _ in range(n):
                for step in plan:
                    args = dict(step["input"])
                    if step["tool"] == "memory_write":
                        args["value"] = "Which country brings the most paid revenue?"
                    tools.call(step["tool"], ctx, args)
            return time.perf_counter() - t0

        body = '{"input": {"question": "Which country brings the most paid revenue?"}}'
        through_queue(agent_id, body, 2)  # warm-up (DuckDB import, caches)
        bare_tools(2)
        with counting() as run_calls:
            through_queue(agent_id, body, 1)
        run_calls = Counter({k: v for k, v in run_calls.items() if not k.startswith(POLLER)})
        with counting() as bare_calls:
            bare_tools(1)
        ours, ref = [], []
        for i in range(ROUNDS):  # alternating, each going first in turn
            if i % 2:
                ours.append(through_queue(agent_id, body, RUNS))
                ref.append(bare_tools(RUNS))
            else:
                ref.append(bare_tools(RUNS))
                ours.append(through_queue(agent_id, body, RUNS))
        run_s, bare_s = statistics.median(ours) / RUNS, statistics.median(ref) / RUNS
        lines += [f"Medians of {ROUNDS} rounds of {RUNS} runs [min-max]; AWS calls of one run, the platform's "
                  "own (the queue's receive and delete are the poller's: Lambda's event source mapping makes them, "
                  "not the function; here the bench's loop does).", "",
                  "| measure | per run | runs/s | AWS calls |", "|---|---|---|---:|",
                  f"| run through POST + queue + worker (4 steps, extractive answer) | {run_s * 1000:.1f} ms "
                  f"[{min(ours) / RUNS * 1000:.1f}-{max(ours) / RUNS * 1000:.1f}] | {1 / run_s:.1f} | "
                  f"{sum(run_calls.values())} |",
                  f"| reference: the same 4 tool calls made directly | {bare_s * 1000:.1f} ms "
                  f"[{min(ref) / RUNS * 1000:.1f}-{max(ref) / RUNS * 1000:.1f}] | {1 / bare_s:.1f} | "
                  f"{sum(bare_calls.values())} |",
                  f"| ratio | {run_s / bare_s:.2f}x | |",
                  f"| overhead per step (run minus bare, / 4) | {(run_s - bare_s) / 4 * 1000:.1f} ms | |", ""]

        from bench.common import after_quiet

        lines += after_quiet("A run after quiet (POST + queue + worker; the delivery reads its scope once)",
                             "run through POST + queue + worker", lambda: through_queue(agent_id, body, 1),
                             "the same 4 tool calls made directly", lambda: bare_tools(1), n=8, uncounted=POLLER)

        cheap = client.http.post("/v1/agents", headers=auth, body=json.dumps({
            "name": "cheap", "tools": ["memory_read"], "limits": {"max_steps": CHEAP_STEPS},
            "plan": [{"name": f"s{i}", "tool": "memory_read", "input": {"key": "k"}} for i in range(CHEAP_STEPS)]}))
        cheap_id = json.loads(cheap.body)["id"]

        def bare_reads(n: int) -> float:
            ctx = tools.ToolContext(principal, region, cheap_id, "run_bench")
            t0 = time.perf_counter()
            for _ in range(n * CHEAP_STEPS):
                tools.call("memory_read", ctx, {"key": "k"})
            return time.perf_counter() - t0

        n = max(5, RUNS // 2)
        cheap_runs, cheap_ref = [], []
        for i in range(ROUNDS):
            if i % 2:
                cheap_runs.append(through_queue(cheap_id, '{"input": {}}', n))
                cheap_ref.append(bare_reads(n))
            else:
                cheap_ref.append(bare_reads(n))
                cheap_runs.append(through_queue(cheap_id, '{"input": {}}', n))
        step_cost = (statistics.median(cheap_runs) - statistics.median(cheap_ref)) / (n * CHEAP_STEPS)
        lines += ["| per-step overhead (ledger put + completion transaction, heartbeat, 2 events) | value |",
                  "|---|---|",
                  f"| {CHEAP_STEPS}-step plan of memory reads, per run (median [min-max]) | "
                  f"{statistics.median(cheap_runs) / n * 1000:.1f} ms [{min(cheap_runs) / n * 1000:.1f}-"
                  f"{max(cheap_runs) / n * 1000:.1f}] |",
                  f"| reference: {CHEAP_STEPS} direct memory reads | {statistics.median(cheap_ref) / n * 1000:.1f} ms "
                  f"[{min(cheap_ref) / n * 1000:.1f}-{max(cheap_ref) / n * 1000:.1f}] |",
                  f"| overhead per step | {step_cost * 1000:.2f} ms |", ""]
        clock.reset()
    return lines


def _under_local_run() -> list[str]:
    import requests

    from chalicelib.core import process_state
    from chalicelib.core.config import settings
    from infra.local_run import DEFAULT_PORTS, LocalPlatform
    from tests.functional.conftest import reset_process_state
    from tests.integration.conftest import free_port

    saved = dict(os.environ)
    state = tempfile.mkdtemp(prefix="bench-agents-")
    os.environ["RESOURCE_PREFIX"] = "aiplat"
    settings.cache_clear()
    process_state.reset_all(derived=True)
    reset_process_state()  # the in-process section's signing key and verified tokens are not the local stack's
    platform = LocalPlatform(ports={g: free_port() for g in DEFAULT_PORTS},
                             emulator_port=free_port(), state_dir=state)
    lines: list[str] = []
    try:
        info = platform.start()
        base, demo = info["urls"]["platform"], info["demo"]
        h = {"Authorization": f"Bearer {demo['api_token']}"}
        latencies: list[float] = []
        worker_ms: list[float] = []
        for i in range(LATENCY_RUNS + 1):
            t0 = time.perf_counter()
            r = requests.post(f"{base}/agents/{demo['agent_id']}/runs", headers=h, timeout=30,
                              json={"input": {"question": f"Which country brings the most paid revenue? ({i})"}})
            run = r.json()
            while True:
                got: dict[str, Any] = requests.get(f"{base}/agents/{demo['agent_id']}/runs/{run['id']}", headers=h,
                                                   timeout=30).json()
                if got["status"] not in ("queued", "in_progress"):
                    break
                time.sleep(0.01)
            took = time.perf_counter() - t0
            assert got["status"] == "completed", got
            if i:  # the first run pays the worker's imports
                latencies.append(took)
                from chalicelib.core import clock

                worker_ms.append((clock.parse_iso(got["finished_at"]) - clock.parse_iso(got["started_at"]))
                                 .total_seconds() * 1000)
        lines += ["| POST -> completed under make run's worker loop | p50 | p99 |", "|---|---|---|",
                  f"| end to end ({len(latencies)} runs, one at a time) | {_pct(latencies, 50) * 1000:.0f} ms | "
                  f"{_pct(latencies, 99) * 1000:.0f} ms |",
                  f"| reference: the worker's own time (started -> finished) | {statistics.median(worker_ms):.0f} ms | "
                  f"{_pct(worker_ms, 99):.0f} ms |", "",
                  "The difference is the request, the queue's delivery and the bench reading the run back: each "
                  "queue has threads of its own (`infra/local/workers.py`) whose long poll a new message ends at once, "
                  "as Lambda's poller delivers."]
    finally:
        platform.stop()
        os.environ.clear()
        os.environ.update(saved)
        settings.cache_clear()
        process_state.reset_all(derived=True)
    return lines


def main() -> None:
    _env()
    for line in _in_process():
        print(line)
    print()
    for line in _under_local_run():
        print(line)
