"""Deleting a dataset's objects that no kept snapshot references (and all of them when it goes)."""
from __future__ import annotations

from chalicelib.gateway.snapshots.manifests import MANIFEST, dataset_root, read_manifest
from chalicelib.gateway.snapshots.transfer import delete_keys, list_keys


def prune(region: str, workspace_id: str, dataset_id: str, keep: set[str],
          known: dict[str, list[str]] | None = None, candidates: list[str] | None = None,
          manifest_waits: bool = False) -> int:
    """Delete every object of the dataset except the files of the snapshots in ``keep`` (prefixes) and their
    manifests; returns objects removed. ``known``: files of some of those snapshots the caller already
    has (prefix -> keys), whose manifests are then not read again. ``candidates``: delete only these (the
    files of the one snapshot a sync retires) instead of listing the dataset's objects. ``manifest_waits``:
    when only the retired snapshot's manifest would go (what a sync that stacks a layer retires), it is left
    to the next listing prune; layers stack at most ``MAX_LAYERS`` deep before a new base lists, so at most
    that many manifests wait."""
    root = dataset_root(workspace_id, dataset_id)
    known = known or {}
    referenced = {f"{p}/{MANIFEST}" for p in keep if p}
    for p in keep:
        if p:
            referenced.update(known[p] if p in known else read_manifest(region, p).keys())
    listed = list_keys(region, root) if candidates is None else [k for k in candidates if k.startswith(root)]
    doomed = [k for k in listed if k not in referenced]
    if manifest_waits and candidates is not None and all(k.endswith(f"/{MANIFEST}") for k in doomed):
        return 0
    if doomed:
        delete_keys(region, doomed)
    return len(doomed)


def delete_dataset_data(region: str, workspace_id: str, dataset_id: str) -> int:
    return prune(region, workspace_id, dataset_id, set())
