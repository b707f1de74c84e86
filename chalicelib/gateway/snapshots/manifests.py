"""A snapshot's bookkeeping: its manifest (base parts with their digests, layers, the snapshot it replaced),
where it lives, reading and writing manifests, and the manifests of the snapshots this process committed."""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import aws, process_state
from chalicelib.gateway.snapshots import transfer
from chalicelib.gateway.snapshots.transfer import BUCKET, list_keys

MANIFEST = "manifest.json"
COMMITTED_MANIFESTS = 256  # the manifests of snapshots this process committed that it remembers
_COMMITTED: OrderedDict[tuple[str, str], str] = OrderedDict()  # (region, prefix) -> manifest JSON
_COMMITTED_LOCK = threading.Lock()
process_state.enrol(f"{__name__}._COMMITTED", _COMMITTED.clear)


@dataclass
class Manifest:
    base: list[str]
    layers: list[dict[str, Any]] = field(default_factory=list)  # {"upserts": key|None, "deletes": key|None, "rows": n}
    row_count: int = 0
    base_rows: int = -1  # -1: unknown (a snapshot written without a manifest)
    # per base part, its digest: {"lo": min _key, "hi": max _key (or bounds of them), "sources": the _source
    # values of its rows ("" for none), "rows", "hsum": the sum of its row hashes}; lets an incremental sync
    # read only the parts a change can touch (``touched_parts``) and a full refresh compare only the parts
    # that changed (``same_parts``). None: a base written before digests existed (the next layer reads the
    # whole snapshot instead); digests without "hsum" are never equal to a new one.
    parts: list[dict[str, Any]] | None = None
    # the snapshot this one replaced: {"prefix", "keys"}, {} for none (the files a later sync's prune deletes
    # unlisted); None: written before manifests said
    replaced: dict[str, Any] | None = None
    prefix: str = ""  # where it was read from (not stored)

    def keys(self) -> list[str]:
        return self.base + [k for layer in self.layers for k in (layer.get("upserts"), layer.get("deletes")) if k]

    def replacing(self, old: Manifest) -> Manifest:
        """This manifest, naming ``old`` as the snapshot it replaces (none unless ``old`` was read from a prefix)."""
        self.replaced = {"prefix": old.prefix, "keys": old.keys()} if old.prefix else {}
        return self


    def to_json(self) -> str:
        doc: dict[str, Any] = {"version": 1, "base": self.base, "layers": self.layers, "row_count": self.row_count,
                               "base_rows": self.base_rows}
        if self.parts is not None:
            doc["parts"] = self.parts
        if self.replaced is not None:
            doc["replaced"] = self.replaced
        return json.dumps(doc, separators=(",", ":"))


@dataclass
class SnapshotResult:
    prefix: str
    row_count: int
    rows_written: int  # new or changed rows
    rows_deleted: int
    parts: int  # objects written
    compacted: bool = True
    layer_added: bool = False  # a layer sync that stacked a new layer (at most ``MAX_LAYERS`` before a new base)
    incoming_rows: int = 0  # unique keys that arrived (``rows_written`` of them new or changed)
    keys: list[str] = field(default_factory=list)  # the snapshot's files (its manifest's)
    old_keys: list[str] = field(default_factory=list)  # the files of the snapshot it replaces
    # the files of the snapshot before that one, from its manifest (None: unknown, a prune must list)
    older_files: list[str] | None = None
    # a complete batch's rows as read (before the last row per key won): rows per source, columns with a null
    rows_by_source: dict[str, int] = field(default_factory=dict)
    null_columns: set[str] = field(default_factory=set)
    manifest: Manifest | None = None  # the one it wrote (None: the snapshot stayed)


def dataset_root(workspace_id: str, dataset_id: str) -> str:
    return f"datasets/{workspace_id}/{dataset_id}/"


def snapshot_prefix(workspace_id: str, dataset_id: str, sync_id: str, attempt: int) -> str:
    return f"{dataset_root(workspace_id, dataset_id)}{sync_id}-a{attempt}"


def remember_committed(region: str, snap: SnapshotResult) -> None:
    """Keep the manifest of a snapshot this process wrote and then committed, so that the dataset's next sync
    here does not read it again. A committed snapshot's files never change: its prefix is its run's and
    attempt's, and a finished run writes nothing more."""
    if snap.manifest is None:
        return
    with _COMMITTED_LOCK:  # a local process runs several sync workers on threads
        _COMMITTED[(region, snap.prefix)] = snap.manifest.to_json()
        _COMMITTED.move_to_end((region, snap.prefix))
        while len(_COMMITTED) > COMMITTED_MANIFESTS:
            _COMMITTED.popitem(last=False)


def read_manifest(region: str, prefix: str) -> Manifest:
    """The files of the snapshot at ``prefix`` (a prefix without a manifest: all its Parquet parts)."""
    remembered = _COMMITTED.get((region, prefix))
    if remembered is not None:
        return parse_manifest(remembered, prefix)
    s3 = aws.client("s3", region)
    try:
        body = s3.get_object(Bucket=aws.bucket_name(BUCKET, region), Key=f"{prefix}/{MANIFEST}")["Body"].read()
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") not in ("NoSuchKey", "404"):
            raise
        return Manifest(base=sorted(k for k in list_keys(region, prefix + "/") if k.endswith(".parquet")),
                        prefix=prefix)
    return parse_manifest(body, prefix)


def parse_manifest(body: str | bytes, prefix: str) -> Manifest:
    doc = json.loads(body)
    return Manifest(base=doc["base"], layers=doc.get("layers", []), row_count=int(doc.get("row_count", 0)),
                    base_rows=int(doc.get("base_rows", -1)), parts=doc.get("parts"), replaced=doc.get("replaced"),
                    prefix=prefix)


def replaced_files(manifest: Manifest) -> list[str] | None:
    """The files (and manifest) of the snapshot ``manifest`` replaced; None when it does not say."""
    gone = manifest.replaced
    if gone is None:
        return None
    return [*gone["keys"], f"{gone['prefix']}/{MANIFEST}"] if gone else []


def put_manifest(region: str, prefix: str, manifest: Manifest) -> None:
    key = f"{prefix}/{MANIFEST}"
    aws.client("s3", region).put_object(Bucket=aws.bucket_name(BUCKET, region), Key=key,
                                        Body=manifest.to_json().encode(), ContentType="application/json")
    transfer.part_written(key)  # looked up at call time: tests replace it
