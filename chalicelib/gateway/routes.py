"""Data gateway routes at {gateway_url}: /v1/connectors, /v1/catalog, /v1/lineage, /v1/query,
/v1/policies and /graphql. GraphQL and DuckDB are imported only inside the views that need them."""
from __future__ import annotations

from chalicelib.core.web import Api

api = Api("gateway")
