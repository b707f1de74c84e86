"""The tool catalogue: every tool the platform offers, declared once.

A tool is offered on one surface: to **agents** (a run calls it as the user who started it; the agents'
runtime binds each name to its function in ``agents/tools.py``) or over **MCP** (``gateway/mcp/tools.py``
runs the gateway operation it names). Each ``ToolSpec`` states its name, what it does, its arguments, the
permission it needs and whether it writes:

- an agent tool's arguments are its input fields (``F``); their JSON Schema is derived from them
  (``agents/plan_schema.call_schema`` for a model's call, ``plan_schema.input_schema`` for a plan step);
- an MCP tool's arguments are the parameters and JSON body of the operation it names in the gateway's
  OpenAPI document (``mcp.tools.inputs``), and its permission is that operation's ``x-permission``
  (``tests/unit/test_tool_catalog.py`` checks the two agree).

Readers: the agents' runtime and plan schemas (``agents/tools.TOOLS``), the MCP server's ``tools/list``
(``mcp/tools.TOOLS``), and the web app through ``GET /v1/agents/tools`` (``agents/agent_routes.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from chalicelib.core.http.validation import F

AGENTS = "agents"
MCP = "mcp"

MAX_ROWS = 200  # rows an agent's query may return
MEMORY_KEY_MAX = 128
MEMORY_KEY_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*$"  # no control characters


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the catalogue declares it."""

    name: str
    surface: str  # ``AGENTS`` or ``MCP``
    title: str  # a short human name (the web app's label, MCP's ``title``)
    description: str  # agents: what the model is told; MCP: the operation's summary and description say it
    permission: str  # the permission a caller needs (MCP: lists the tool; agents: the tool's service checks it)
    writes: bool = False  # changes state: guarded in model-chosen agent runs; MCP ``readOnlyHint`` false
    summary: str = ""  # agents: one sentence for people choosing what an agent may do
    fields: dict[str, F] = field(default_factory=dict)  # agents: the input fields
    sends_out: bool = False  # agents: sends data outside the workspace (refused while the run is tainted)
    # MCP: the gateway operation the tool runs, and how its inputs and answer map to the tool's
    method: str = ""
    path: str = ""
    hidden: tuple[str, ...] = ()  # operation inputs the tool does not offer
    required: tuple[str, ...] = ()  # inputs the tool requires beyond the operation's own
    rows_key: str = "items"  # the list in the answer whose length is the call's row count


CATALOGUE: tuple[ToolSpec, ...] = (
    # --- agents -----------------------------------------------------------------------------------------
    ToolSpec("knowledge_search", AGENTS, "Search documents and data",
             "Search the workspace's indexed documents and datasets; returns passages with citations.",
             "knowledge.read",
             summary="Finds passages in the workspace's documents and datasets you may read.",
             fields={"query": F(str, required=True, min_len=1, max_len=1000), "limit": F(int, minimum=1, maximum=20)}),
    ToolSpec("query", AGENTS, "Run SQL queries",
             "Run one federated SQL SELECT over the datasets the user may read.", "knowledge.read",
             summary="Reads datasets with SQL; field policies mask sensitive columns.",
             fields={"sql": F(str, required=True, min_len=1, max_len=20_000),
                     "limit": F(int, minimum=1, maximum=MAX_ROWS)}),
    ToolSpec("catalog_search", AGENTS, "Search the catalog",
             "Search the data catalog (names, descriptions, field names).", "knowledge.read",
             summary="Finds datasets by name, owner and classification.",
             fields={"query": F(str, max_len=200), "limit": F(int, minimum=1, maximum=25)}),
    ToolSpec("dataset_schema", AGENTS, "Read a dataset's columns",
             "The normalised schema and field policies of one dataset (id or name).", "knowledge.read",
             summary="Looks up a dataset's fields and their policies.",
             fields={"dataset": F(str, required=True, min_len=1, max_len=128)}),
    ToolSpec("memory_read", AGENTS, "Read its notes",
             "Read what this agent remembered for this user (one key, or every key).", "agents.run",
             summary="Reads what earlier runs of this agent wrote down.",
             fields={"key": F(str, min_len=1, max_len=MEMORY_KEY_MAX, pattern=MEMORY_KEY_PATTERN)}),
    ToolSpec("memory_write", AGENTS, "Write notes",
             "Remember a value for this user (kept 30 days after the last write).", "agents.run", writes=True,
             summary="Keeps a short note for later runs.",
             fields={"key": F(str, required=True, min_len=1, max_len=MEMORY_KEY_MAX, pattern=MEMORY_KEY_PATTERN),
                     "value": F((str, int, float, bool, list, dict), required=True)}),
    # --- MCP: one per gateway operation (description and arguments from the operation) -------------------
    ToolSpec("search_datasets", MCP, "Search datasets", "", "knowledge.read",
             method="GET", path="/v1/catalog/datasets", hidden=("search",)),
    ToolSpec("get_dataset_schema", MCP, "Dataset schema and field policies", "", "knowledge.read",
             method="GET", path="/v1/catalog/datasets/{dataset_id}/schema", rows_key="fields"),
    ToolSpec("get_lineage", MCP, "Dataset lineage", "", "knowledge.read",
             method="GET", path="/v1/lineage/{dataset_id}", rows_key="nodes"),
    # ``answer`` writes a lineage edge of the caller's choosing: the tool call records its own edge instead
    ToolSpec("query", MCP, "Read-only federated SQL query", "", "knowledge.read",
             method="POST", path="/v1/query", hidden=("answer",), rows_key="rows"),
    ToolSpec("search_knowledge", MCP, "Search documents and data (verified passages)", "", "knowledge.read",
             method="GET", path="/v1/knowledge/search"),
    ToolSpec("list_connectors", MCP, "List connectors and their health", "", "dashboards.read",
             method="GET", path="/v1/connectors", rows_key="connectors"),
    ToolSpec("sync_connector", MCP, "Start a connector sync", "", "connectors.manage", writes=True,
             method="POST", path="/v1/connectors/{connector_id}/sync", required=("idempotency_key",), rows_key=""),
)


def on(surface: str) -> tuple[ToolSpec, ...]:
    """The tools of one surface, in the catalogue's order."""
    return tuple(t for t in CATALOGUE if t.surface == surface)
