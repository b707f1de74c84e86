"""Knowledge storage (regional). One table keyed by workspace; its items are ``index#<dataset id>``: the
manifest of a dataset's current index (S3 prefix of its files in the region's ``knowledge`` bucket, the
dataset snapshot it was built from, chunk count, and the fingerprint of the field policies it was built
under); and ``rebuild#<dataset id>``: a rebuild a search asked for and queued (``knowledge/indexer``).
Per-document ACLs are the dataset's row-level policy, on its catalog item (``gateway/reader.py``);
``docacl#`` items of earlier versions are no longer read.
"""
from __future__ import annotations

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from chalicelib.core.store.tables import BaseModel, regional

KIND_INDEX = "index#"
KIND_REBUILD = "rebuild#"  # a rebuild asked for by a search and queued (``version``: its target)


class KnowledgeAttrs(BaseModel):
    TABLE = "knowledge"
    workspace_id = UnicodeAttribute(hash_key=True)
    key = UnicodeAttribute(range_key=True)  # index#<ds_...>
    dataset_id = UnicodeAttribute()
    version = UnicodeAttribute(null=True)  # index: the dataset snapshot (data prefix) it was built from
    prefix = UnicodeAttribute(null=True)  # index: S3 prefix of its files
    source_kind = UnicodeAttribute(null=True)  # index: document | dataset
    policy_fingerprint = UnicodeAttribute(null=True)
    embedding_model = UnicodeAttribute(null=True)  # index: the model of its dense vectors (None: lexical only)
    index_format = UnicodeAttribute(null=True)  # index: ``reader.index_format()`` it was built under
    chunk_count = NumberAttribute(default=0)
    updated_at = UnicodeAttribute()


def knowledge(region: str) -> type[KnowledgeAttrs]:
    return regional(KnowledgeAttrs, region)
