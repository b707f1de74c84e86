"""No import cycles in ``chalicelib``: the graph of every import, at module level and inside functions alike
(``TYPE_CHECKING`` blocks left out), has no strongly connected component with more than one module. An import
inside a function is a deliberate deferral named in ``DEFERRED`` (or made by the composition root), with its
reason; any other is a failure."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "chalicelib"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            pending.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            pending.extend(node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body])
    return found


# module imported inside functions -> why it is not imported at module level
DEFERRED = {
    "chalicelib.knowledge.service": "loads NumPy and bm25s: at first use, not at a group's cold start",
    "chalicelib.knowledge.grounding": "imports the knowledge service (NumPy): at first use",
    "chalicelib.gateway.catalog.index": "the catalog index loads NumPy: at the first search",
    "chalicelib.gateway.mcp.protocol": "loads pydantic and the MCP wire types: at the first MCP request",
    "chalicelib.gateway.api.graphql_api": "loads graphql-core: at the first GraphQL request, not at cold start",
    "chalicelib.gateway.query.service": "the query engine: at an agent run's first query, not with the platform "
                                        "group, which holds the agent tools' input fields",
}
# modules whose imports inside functions are all deliberate
DEFERRING = {
    "chalicelib.workers.jobs": "the composition root: each job loads only its own handler's modules",
}


def _all_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import of the module, inside functions too, except ``TYPE_CHECKING`` blocks."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node):
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))
    return found


def import_graph(inside_functions: bool = True) -> dict[str, set[str]]:
    return _graph(inside_functions)[0]


def function_level_imports() -> set[tuple[str, str]]:
    """(importer, imported module) of every chalicelib import made inside a function."""
    return _graph(True)[1]


def _graph(inside_functions: bool) -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    deferred: set[tuple[str, str]] = set()
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text())
        top = {id(node) for node in _top_level_imports(tree)}
        for node in _all_imports(tree) if inside_functions else _top_level_imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            hits = [t for t in targets if t in modules and t != name]
            graph[name].update(hits)
            if id(node) not in top and hits:
                deferred.add((name, max(hits, key=len)))
    return graph, deferred


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_graph_sees_the_identity_modules() -> None:
    graph = import_graph()
    assert "chalicelib.identity.models" in graph["chalicelib.identity.oauth.issuing"]
    assert "chalicelib.identity.mfa.webauthn" in graph["chalicelib.identity.mfa.factors"]


def test_chalicelib_has_no_import_cycles_counting_imports_inside_functions() -> None:
    assert cycles(import_graph()) == []


def test_the_graph_sees_imports_inside_functions() -> None:
    assert "chalicelib.knowledge.service" in import_graph()["chalicelib.chat.service"]
    assert "chalicelib.knowledge.service" not in import_graph(inside_functions=False)["chalicelib.chat.service"]


def test_every_import_inside_a_function_is_a_named_deferral() -> None:
    found = function_level_imports()
    unexplained = sorted((a, b) for a, b in found if b not in DEFERRED and a not in DEFERRING)
    assert unexplained == [], "import at module level, or name the deferral and its reason in DEFERRED"
    assert set(DEFERRED) <= {b for _, b in found}, "a DEFERRED entry nothing defers any more"
