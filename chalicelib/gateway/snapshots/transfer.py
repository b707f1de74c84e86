"""A snapshot's files to and from the ``data`` bucket: one streamed GET or PUT each (no transfer thread pool),
skipping S3 for a file this container holds (``local_parts``); listing and deleting a prefix's objects."""
from __future__ import annotations

import contextlib
import os
import shutil

from chalicelib.core import aws
from chalicelib.gateway import local_parts

BUCKET = "data"


def part_written(key: str) -> None:
    """Called after each file of a snapshot is uploaded (a seam for crash tests; does nothing)."""


def list_keys(region: str, prefix: str) -> list[str]:
    s3 = aws.client("s3", region)
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=aws.bucket_name(BUCKET, region), Prefix=prefix):
        keys.extend(o["Key"] for o in page.get("Contents", []))
    return keys


def delete_keys(region: str, keys: list[str]) -> None:
    local_parts.forget(region, keys)
    s3 = aws.client("s3", region)
    for i in range(0, len(keys), 1000):
        s3.delete_objects(Bucket=aws.bucket_name(BUCKET, region),
                          Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})


def download(region: str, keys: list[str], into: str, *, keep: bool = True) -> dict[str, str]:
    """Each key into ``into`` for reading: key -> local path. From this container's copy when it has one
    (``local_parts``), else one GET each, streamed (no transfer thread pool), and with ``keep`` the file
    becomes the local copy."""
    os.makedirs(into, exist_ok=True)
    s3 = aws.client("s3", region)
    bucket = aws.bucket_name(BUCKET, region)
    out: dict[str, str] = {}
    for i, key in enumerate(keys):
        path = os.path.join(into, f"{i:05d}.parquet")
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)  # never written through: it may be a link to a local copy
        if not local_parts.copy_to(region, key, path):
            body = s3.get_object(Bucket=bucket, Key=key)["Body"]
            with open(path, "wb") as fh:
                shutil.copyfileobj(body, fh, 1 << 20)
            if keep:
                local_parts.keep(region, key, path)
        out[key] = path
    return out


def upload(region: str, path: str, key: str, *, keep: bool = True) -> None:
    """One PUT streamed from the file (no transfer thread pool: its buffers would add to the peak). With
    ``keep`` the file then moves to the local copies (``local_parts``); else it stays where it is."""
    with open(path, "rb") as fh:
        aws.client("s3", region).put_object(Bucket=aws.bucket_name(BUCKET, region), Key=key, Body=fh)
    if keep:
        local_parts.keep(region, key, path, move=True)
    part_written(key)  # a module global, looked up at call time: tests replace it


def part_keys(prefix: str, paths: list[str]) -> list[str]:
    return [f"{prefix}/part-{p:05d}.parquet" for p in range(len(paths))]


def upload_all(region: str, paths: list[str], keys: list[str]) -> None:
    """The files, in order, each to its key (the files stay)."""
    for path, key in zip(paths, keys, strict=True):
        upload(region, path, key, keep=False)
