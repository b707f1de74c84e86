"""Residency in operation: encrypted backups, two-person restore and retention sweeps (docs/residency.md)."""
