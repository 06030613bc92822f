"""The mongo backend's per-user grants documents (no server: the documents and updates it would send)."""

from __future__ import annotations

import pytest

from authzbench.backends.expansion import Expansion, chunks_of
from authzbench.generator import generate
from authzbench.schema.model import PERMISSIONS
from authzbench.systems.mongo.grants import _grant_docs, grant_id, grant_updates
from authzbench.truth.oracle import Oracle


def test_grants_documents_hold_exactly_each_users_lookup_even_from_many_small_chunks(tmp_path):
    ds = generate("tiny", tmp_path / "ds")
    chunked = Expansion(ds, chunk_pairs=50)
    assert len(chunked.user_chunks()) > 5
    docs = {d["_id"]: d["resources"] for d in chunks_of(_grant_docs(chunked))}
    o = Oracle(ds)
    for u in range(ds.entities["user"]):
        for perm in PERMISSIONS:
            assert docs.get(grant_id(u, perm), []) == o.lookup_resources(u, perm)
    assert len(set(docs)) == len(docs)  # one document per (user, permission)


def test_grant_updates_add_and_remove_per_user_and_permission():
    ops = grant_updates([(3, "view", 10, True), (3, "view", 11, True), (3, "manage", 10, False)])
    assert ({"_id": grant_id(3, "view")}, {"$addToSet": {"resources": {"$each": [10, 11]}}}) in ops
    assert ({"_id": grant_id(3, "manage")}, {"$pullAll": {"resources": [10]}}) in ops
    assert len(ops) == 2 and grant_id(3, "view") != grant_id(3, "manage")


def test_an_op_pymongo_cancels_after_a_heartbeat_timeout_counts_as_a_timeout():
    from pymongo.errors import AutoReconnect, _OperationCancelled

    from authzbench.measure.timing import is_timeout
    from authzbench.systems.mongo.adapter import _heartbeat_timeout_is_a_timeout

    def raising(exc: Exception):
        @_heartbeat_timeout_is_a_timeout
        def op():
            raise exc
        with pytest.raises(Exception) as info:
            op()
        return info.value

    assert is_timeout(raising(_OperationCancelled("operation cancelled")))
    other = raising(AutoReconnect("connection closed"))  # a lost connection stays an error of its own
    assert type(other) is AutoReconnect and not is_timeout(other)


def test_a_chunk_of_users_without_a_permission_makes_no_grant_document():
    import numpy as np

    class OneChunk:
        n_resources = 10

        def iter_user_keys(self):
            yield np.array([], dtype=np.int64), np.array([3 * 10 + 4, 3 * 10 + 7], dtype=np.int64)

    docs = list(chunks_of(_grant_docs(OneChunk())))
    assert docs == [{"_id": grant_id(3, "view"), "resources": [4, 7]}]
