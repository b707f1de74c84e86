"""Lineage: edges ``source -> target`` between connectors, datasets, query runs, saved queries, chat
answers and agent runs, and the graph around one dataset.

Edges live in the workspace's region, keyed ``<source_id>><target_id>`` (a range-key prefix walk gives
a node's downstream edges, the ``by_target`` index its upstream edges). The graph of a dataset walks
upstream to its sources and downstream up to the answers, breadth first, newest edges first, at most
``depth`` hops each way (default 3, hard maximum 10) and ``MAX_NODES`` nodes; ``truncated`` says more
exists beyond either limit. Nodes the caller may not see end the walk there and are never shown.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from chalicelib.core import clock
from chalicelib.core.authz import Principal, require
from chalicelib.core.errors import validation_error
from chalicelib.core.tenancy import region_of
from chalicelib.gateway import catalog, models

DEFAULT_DEPTH = 3
MAX_DEPTH = 10
MAX_NODES = 200
NODE_TYPES = ("CONNECTOR", "DATASET", "QUERY", "SAVED_QUERY", "CHAT_ANSWER", "AGENT_RUN")


def record_edges(workspace_id: str, edges: Iterable[tuple[str, str, str, str, dict[str, Any]]]) -> None:
    """Write edges ``(source_type, source_id, target_type, target_id, details)`` (idempotent per pair)."""
    cls = models.lineage_edges(region_of(workspace_id))
    now = clock.iso()
    with cls.batch_write() as batch:
        for s_type, s_id, t_type, t_id, details in edges:
            batch.save(cls(workspace_id, f"{s_id}>{t_id}", source_id=s_id, source_type=s_type.lower(),
                           target_id=t_id, target_type=t_type.lower(), created_at=now,
                           details=json.dumps(details or {}, separators=(",", ":"), default=str)))


def _edge(item: Any) -> dict[str, Any]:
    return {"source": item.source_id, "source_type": item.source_type.upper(), "target": item.target_id,
            "target_type": item.target_type.upper(), "created_at": item.created_at,
            "details": json.loads(item.details or "{}")}


def _downstream(cls: Any, ws: str, node: str, limit: int) -> list[dict[str, Any]]:
    return [_edge(i) for i in cls.query(ws, cls.edge.startswith(node + ">"), scan_index_forward=False, limit=limit)]


def _upstream(cls: Any, ws: str, node: str, limit: int) -> list[dict[str, Any]]:
    return [_edge(i) for i in cls.by_target.query(ws, cls.target_id == node, scan_index_forward=False, limit=limit)]


def graph(principal: Principal, dataset_id: str, depth: int = DEFAULT_DEPTH) -> dict[str, Any]:
    """``{root, depth, nodes, edges, truncated}`` around a readable dataset."""
    require(principal, "knowledge.read")
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= MAX_DEPTH:
        raise validation_error([{"field": "depth", "message": f"must be between 1 and {MAX_DEPTH}"}])
    root = catalog.record(principal, dataset_id)
    snap = catalog.snapshot(principal.workspace_id)
    cls = models.lineage_edges(region_of(principal.workspace_id))
    ws = principal.workspace_id
    nodes: dict[str, dict[str, Any]] = {root.id: {"id": root.id, "type": "DATASET", "name": root.name, "hop": 0}}
    edges: dict[tuple[str, str], dict[str, Any]] = {}
    truncated = False

    def visible(node_id: str, node_type: str, details: dict[str, Any], name_key: str) -> dict[str, Any] | None:
        if node_type == "DATASET":
            rec = snap.datasets.get(node_id)
            if rec is None or not catalog.can_read(principal, rec):
                return None
            return {"id": node_id, "type": "DATASET", "name": rec.name}
        if node_type == "CONNECTOR":
            conn = snap.connectors.get(node_id)
            return {"id": node_id, "type": "CONNECTOR", "name": conn["name"] if conn else details.get(name_key)}
        if node_type in NODE_TYPES:
            return {"id": node_id, "type": node_type, "name": details.get(name_key)}
        return None

    for direction in ("up", "down"):
        frontier = [root.id]
        for hop in range(1, depth + 1):
            nxt: list[str] = []
            for node in frontier:
                if len(nodes) >= MAX_NODES:
                    truncated = True
                    break
                found = (_upstream if direction == "up" else _downstream)(cls, ws, node, MAX_NODES + 1)
                if len(found) > MAX_NODES:
                    truncated = True
                for e in found[:MAX_NODES]:
                    other, other_type = (e["source"], e["source_type"]) if direction == "up" else (e["target"], e["target_type"])
                    if other not in nodes:
                        if len(nodes) >= MAX_NODES:
                            truncated = True
                            break
                        shown = visible(other, other_type, e["details"],
                                        "source_name" if direction == "up" else "target_name")
                        if shown is None:
                            continue
                        nodes[other] = {**shown, "hop": hop if direction == "down" else -hop}
                        nxt.append(other)
                    edges[(e["source"], e["target"])] = {"source": e["source"], "target": e["target"],
                                                        "created_at": e["created_at"]}
            frontier = nxt
            if not frontier:
                break
        else:
            # depth exhausted: is there anything beyond the last ring?
            for node in frontier:
                more = (_upstream if direction == "up" else _downstream)(cls, ws, node, 1)
                if more:
                    truncated = True
                    break
    return {"root": root.id, "depth": depth, "nodes": list(nodes.values()), "edges": list(edges.values()),
            "truncated": truncated}
