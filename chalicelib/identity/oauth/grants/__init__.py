"""Token endpoint grants, one module each, dispatched from the explicit ``GRANTS`` table in ``grants.table``."""
