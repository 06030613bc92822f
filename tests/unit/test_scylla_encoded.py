"""Cassandra/Scylla bulk load: permission rows serialized by numpy are byte-identical to the driver's
own BATCH encoding (no server: the frame body is compared)."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("cassandra")

from cassandra import ConsistencyLevel  # noqa: E402
from cassandra.protocol import BatchMessage  # noqa: E402
from cassandra.query import BatchType  # noqa: E402

from authzbench.systems.scylla.cql import _Encoded, _encoded_batches, _fixed_rows, _ser_int  # noqa: E402


def _body(queries, version: int, keyspace: str | None = None) -> bytes:
    f = io.BytesIO()
    BatchMessage(BatchType.UNLOGGED, queries, ConsistencyLevel.LOCAL_QUORUM, keyspace=keyspace).send_body(
        f, version)
    return f.getvalue()


@pytest.mark.parametrize("version", [4, 5])
def test_numpy_encoded_batch_equals_the_drivers_encoding(version):
    _encoded_batches()
    qid = b"\x8a\x00\x13" + bytes(range(13))  # ids hold zero bytes too
    users, res = np.array([7, 7, 7, 2**31 - 1]), np.array([0, 5, 123456, 1])
    manage = np.array([True, False, True, False])
    plain = [(True, qid, [u, r, b"\x01" if m else b"\x00"])
             for u, r, m in zip(_ser_int(users), _ser_int(res), manage, strict=True)]
    rec = _fixed_rows(qid, [users, res, manage])
    ks = "authzbench" if version == 5 else None
    assert _body(_Encoded(rec.tobytes(), len(rec)), version, ks) == _body(plain, version, ks)
    part = rec[1:3]  # a batch is a contiguous slice of the records
    assert _body(_Encoded(part.tobytes(), 2), version, ks) == _body(plain[1:3], version, ks)
