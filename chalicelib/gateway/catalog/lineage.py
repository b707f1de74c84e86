"""Lineage: edges ``source -> target`` between connectors, datasets, query runs, saved queries, chat
answers and agent runs, and the graph around one dataset.

Query lineage is aggregated: one ``QUERY`` node per day and set of datasets read (``record_query``),
whose edges count the queries (``uses``) and expire ``QUERY_LINEAGE_DAYS`` after their day; the edges
of chat answers and agent runs live as long as their chat or run (TTL and deletion with it).
Edges live in the workspace's region, keyed ``<source_id>><target_id>`` (a range-key prefix walk gives
a node's downstream edges, the ``by_target`` index its upstream edges). The graph of a dataset walks
upstream to its sources and downstream up to the answers, breadth first, newest edges first, at most
``depth`` hops each way (default 3, hard maximum 10) and ``MAX_NODES`` nodes; ``truncated`` says more
exists beyond either limit. Nodes the caller may not see end the walk there and are never shown: unreadable
datasets, and answers private to another user (a chat's answer, an agent run and an MCP tool call are
shown only to the user who asked, ran or called; ``gateway/reader.answer_visible``, from the ``user_id``
its edge records).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from chalicelib.core import clock
from chalicelib.core.authz import require
from chalicelib.core.http.errors import validation_error
from chalicelib.core.logs import get_logger
from chalicelib.core.store.transact import Conflict, Tx
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway import models, reader
from chalicelib.gateway.catalog import lineage_events
from chalicelib.gateway.catalog import service as catalog

DEFAULT_DEPTH = 3
MAX_DEPTH = 10
MAX_NODES = 200
QUERY_LINEAGE_DAYS = 90  # query lineage edges live this long after their day (TTL)
MAX_EDGES_PER_QUERY = 100  # one transaction
log = get_logger("gateway.lineage")
NODE_TYPES = ("CONNECTOR", "DATASET", "QUERY", "SAVED_QUERY", "CHAT_ANSWER", "AGENT_RUN", "MCP_TOOL_CALL")


Edge = tuple[str, str, str, str, dict[str, Any]]  # (source_type, source_id, target_type, target_id, details)


def edge_items(region: str, workspace_id: str, edges: Iterable[Edge], *,
               expires_at: int | None = None) -> list[Any]:
    """The items of ``edges`` of a workspace whose content ``region`` holds; ``expires_at`` (epoch seconds,
    the TTL) ties them to their subject's retention."""
    cls = models.lineage_edges(region)
    now = clock.iso()
    edges = list(edges)
    lineage_events.from_edges(region, workspace_id, edges)
    return [cls(workspace_id, f"{s_id}>{t_id}", source_id=s_id, source_type=s_type.lower(), target_id=t_id,
                target_type=t_type.lower(), created_at=now, expires_at=expires_at,
                details=json.dumps(details or {}, separators=(",", ":"), default=str))
            for s_type, s_id, t_type, t_id, details in edges]


def record_edges(region: str, workspace_id: str, edges: Iterable[Edge], *, expires_at: int | None = None) -> None:
    """Write edges (idempotent per pair) in ``region``, the workspace's."""
    cls = models.lineage_edges(region)
    with cls.batch_write() as batch:
        for item in edge_items(region, workspace_id, edges, expires_at=expires_at):
            batch.save(item)


def query_node(dataset_ids: Iterable[str], day: str) -> str:
    """The lineage node of a day's federated queries over one set of datasets (``qday_<YYYYMMDD>_<hash>``)."""
    digest = hashlib.sha256("\n".join(sorted(set(dataset_ids))).encode()).hexdigest()[:16]
    return f"qday_{day.replace('-', '')}_{digest}"


def record_query(region: str, workspace_id: str, used: list[tuple[str, str]], answer: dict[str, str] | None = None,
                 *, user_id: str | None = None, day: str | None = None) -> str | None:
    """Lineage of one federated query, aggregated: one node per day and set of datasets read, one edge
    per dataset into it (``uses`` counts the queries), and ``node -> answer`` when the query serves one.
    Edges expire ``QUERY_LINEAGE_DAYS`` after their day, so reads do not grow the table without bound.
    The answer edge records ``user_id`` (a private answer is shown only to its user); the aggregated
    edges name no user. ``day`` (``YYYY-MM-DD``) is the query's, when it is recorded later (default today).
    One transaction (one round trip) in ``region``, the workspace's; returns the node id."""
    if not used:
        return None
    day = day or clock.utcnow().strftime("%Y-%m-%d")
    node = query_node([ds for ds, _ in used], day)
    cls = models.lineage_edges(region)
    expires = int(clock.parse_iso(f"{day}T00:00:00Z").timestamp()) + (QUERY_LINEAGE_DAYS + 1) * 86400
    now = clock.iso()
    lineage_events.from_edges(region, workspace_id, [("DATASET", ds, "QUERY", node, {}) for ds, _ in used], each_time=True)
    pairs = [(ds, "dataset", node, "query", {"source_name": name, "target_name": f"queries on {day}", "day": day})
             for ds, name in used]
    if answer is not None:
        pairs.append((node, "query", answer["id"], answer["type"].lower(),
                      {"source_name": f"queries on {day}", "target_name": answer["type"].lower(),
                       "user_id": user_id}))
    for _ in range(3):
        tx = Tx(cls.Meta.region)
        for s_id, s_type, t_id, t_type, details in pairs[:MAX_EDGES_PER_QUERY]:
            tx.update(cls(workspace_id, f"{s_id}>{t_id}"), actions=[
                cls.source_id.set(s_id), cls.source_type.set(s_type), cls.target_id.set(t_id),
                cls.target_type.set(t_type), cls.created_at.set(cls.created_at | now),
                cls.details.set(json.dumps(details, separators=(",", ":"))), cls.expires_at.set(expires),
                cls.uses.add(1)])
        try:
            tx.commit()
            return node
        except Conflict:  # another query of the same node at the same moment: count again
            continue
    log.warning("query lineage not recorded after 3 attempts", extra={"node": node})
    return node


def remove_target(region: str, workspace_id: str, target_id: str) -> int:
    """Delete every edge into ``target_id`` (its subject is gone: a deleted chat or run) in ``region``, the
    workspace's."""
    cls = models.lineage_edges(region)
    n = 0
    for item in cls.by_target.query(workspace_id, cls.target_id == target_id):
        item.delete()
        n += 1
    return n


def _edge(item: Any) -> dict[str, Any]:
    details = json.loads(item.details or "{}")
    if item.uses is not None:
        details["uses"] = int(item.uses)
    return {"source": item.source_id, "source_type": item.source_type.upper(), "target": item.target_id,
            "target_type": item.target_type.upper(), "created_at": item.created_at, "details": details}


def _downstream(cls: Any, ws: str, node: str, limit: int) -> list[dict[str, Any]]:
    return [_edge(i) for i in cls.query(ws, cls.edge.startswith(node + ">"), scan_index_forward=False, limit=limit)]


def _upstream(cls: Any, ws: str, node: str, limit: int) -> list[dict[str, Any]]:
    return [_edge(i) for i in cls.by_target.query(ws, cls.target_id == node, scan_index_forward=False, limit=limit)]


class _Walk:
    """One breadth-first walk around a dataset; collects visible nodes and the edges between them."""

    def __init__(self, scope: RequestScope, root: catalog.DatasetRecord) -> None:
        self.principal = scope.principal
        self.snap = catalog.snapshot_of(scope)
        self.cls = models.lineage_edges(scope.home)
        self.nodes: dict[str, dict[str, Any]] = {root.id: {"id": root.id, "type": "DATASET", "name": root.name,
                                                           "hop": 0}}
        self.edges: dict[tuple[str, str], dict[str, Any]] = {}
        self.truncated = False

    def _neighbours(self, direction: str, node: str, limit: int) -> list[dict[str, Any]]:
        walk = _upstream if direction == "up" else _downstream
        return walk(self.cls, self.principal.workspace_id, node, limit)

    def _visible(self, node_id: str, node_type: str, details: dict[str, Any], name_key: str) -> dict[str, Any] | None:
        """The node as the caller may see it, or None when it is hidden (the walk ends there)."""
        if node_type == "DATASET":
            rec = self.snap.datasets.get(node_id)
            if rec is None or not catalog.can_read(self.principal, rec):
                return None
            return {"id": node_id, "type": "DATASET", "name": rec.name}
        if node_type == "CONNECTOR":
            conn = self.snap.connectors.get(node_id)
            return {"id": node_id, "type": "CONNECTOR", "name": conn["name"] if conn else details.get(name_key)}
        if node_type in NODE_TYPES:
            if not reader.answer_visible(self.principal, node_type, details):
                return None  # another user's private answer (a chat's): never shown, the walk ends
            return {"id": node_id, "type": node_type, "name": details.get(name_key)}
        return None

    def _full(self) -> bool:
        """True (and the graph marked truncated) once ``MAX_NODES`` nodes are collected."""
        full = len(self.nodes) >= MAX_NODES
        self.truncated |= full
        return full

    def _expand(self, direction: str, node: str, hop: int) -> list[str]:
        """Add ``node``'s neighbours one hop further in ``direction``; returns the newly reached ones."""
        found = self._neighbours(direction, node, MAX_NODES + 1)
        self.truncated |= len(found) > MAX_NODES
        reached: list[str] = []
        up = direction == "up"
        for e in found[:MAX_NODES]:
            other, other_type = (e["source"], e["source_type"]) if up else (e["target"], e["target_type"])
            if other not in self.nodes:
                if self._full():
                    break
                shown = self._visible(other, other_type, e["details"], "source_name" if up else "target_name")
                if shown is None:
                    continue
                self.nodes[other] = {**shown, "hop": -hop if up else hop}
                reached.append(other)
            self.edges[(e["source"], e["target"])] = {"source": e["source"], "target": e["target"],
                                                     "created_at": e["created_at"]}
        return reached

    def walk(self, direction: str, root_id: str, depth: int) -> None:
        frontier = [root_id]
        for hop in range(1, depth + 1):
            nxt: list[str] = []
            for node in frontier:
                if self._full():
                    break
                nxt.extend(self._expand(direction, node, hop))
            frontier = nxt
            if not frontier:
                return
        # depth exhausted: is there anything beyond the last ring?
        self.truncated |= any(self._neighbours(direction, node, 1) for node in frontier)


def graph(scope: RequestScope, dataset_id: str, depth: int = DEFAULT_DEPTH) -> dict[str, Any]:
    """``{root, depth, nodes, edges, truncated}`` around a dataset the scope's caller may read."""
    principal = scope.principal
    require(principal, "knowledge.read")
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= MAX_DEPTH:
        raise validation_error([{"field": "depth", "message": f"must be between 1 and {MAX_DEPTH}"}])
    root = catalog.record(scope, dataset_id)
    walk = _Walk(scope, root)
    for direction in ("up", "down"):
        walk.walk(direction, root.id, depth)
    return {"root": root.id, "depth": depth, "nodes": list(walk.nodes.values()), "edges": list(walk.edges.values()),
            "truncated": walk.truncated}
