"""The tool catalogue (``chalicelib/tool_catalog.py``) is the one declaration the agents' runtime and the MCP
server read: each surface's tools are exactly its entries, names are unique per surface, and an MCP tool's
declared permission and writing flag agree with the gateway operation it runs."""
from __future__ import annotations

from chalicelib import tool_catalog
from chalicelib.agents import tools as agent_tools
from chalicelib.gateway.mcp import tools as mcp_tools


def test_each_surface_reads_its_entries_of_the_catalogue() -> None:
    agents = tool_catalog.on(tool_catalog.AGENTS)
    assert list(agent_tools.TOOLS) == [s.name for s in agents]
    for spec in agents:
        tool = agent_tools.TOOLS[spec.name]
        assert (tool.description, tool.fields, tool.writes, tool.sends_out) == (
            spec.description, spec.fields, spec.writes, spec.sends_out)
    assert mcp_tools.TOOLS == tool_catalog.on(tool_catalog.MCP)
    assert {s.surface for s in tool_catalog.CATALOGUE} == {tool_catalog.AGENTS, tool_catalog.MCP}


def test_names_are_unique_per_surface_and_every_entry_says_what_it_is() -> None:
    for surface in (tool_catalog.AGENTS, tool_catalog.MCP):
        names = [s.name for s in tool_catalog.on(surface)]
        assert len(names) == len(set(names)), surface
    assert all(s.title and s.permission for s in tool_catalog.CATALOGUE)
    assert all(s.description and s.summary and s.fields for s in tool_catalog.on(tool_catalog.AGENTS))


def test_an_mcp_tools_permission_and_writing_agree_with_its_operation() -> None:
    for spec in tool_catalog.on(tool_catalog.MCP):
        operation = mcp_tools.operation(spec)
        assert spec.permission == operation["x-permission"], spec.name
        assert mcp_tools.listing(spec)["annotations"]["readOnlyHint"] is (not spec.writes)
