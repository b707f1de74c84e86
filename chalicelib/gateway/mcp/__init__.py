"""The gateway's remote MCP server: the protocol exchange (``protocol``), the tools generated from the
gateway's OpenAPI document (``tools``) and the HTTP routes with their OAuth challenges (``routes``)."""
