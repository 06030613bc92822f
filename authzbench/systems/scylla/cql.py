"""The Cassandra / ScyllaDB adapter's CQL ingest path (scylla.py): prepared INSERTs in unlogged batches
grouped by partition, bounded concurrency, the permission rows serialized by numpy straight into the BATCH
frame. A mixin of ScyllaBackend: it uses the adapter's session, prepared statements and options."""

from __future__ import annotations

import io
import struct
import threading
from collections.abc import Callable, Generator, Iterator
from functools import partial
from typing import Any

import numpy as np

from authzbench.backends.base import Batch, Batches, Step
from authzbench.backends.expansion import Expansion, stepped
from authzbench.schema.model import REBAC_RELATIONS
from authzbench.systems.scylla.tables import REVERSE, SOURCE_ROW_COST, SOURCE_TABLE, _short, _Ticker

# A batch the node timed out or shed is sent up to 5 times in all (unlogged inserts are idempotent), as
# the driver's docs advise for idempotent writes; the driver's default policy never retries an unlogged
# batch's write timeout, and without a retry one slow moment of a node ends a whole load.
BATCH_TRIES = 5


def _ser_int(a: np.ndarray) -> list[bytes]:
    """CQL int values, serialized by numpy (big-endian int32), not one Python call per value."""
    return np.ascontiguousarray(a, dtype=">i4").view("V4").tolist()


class CqlIngest:
    """load()'s `cql` path."""

    def _load_cql(self, source: dict[str, Any], expansion: Expansion, tick: _Ticker
                  ) -> Generator[Batches, Any, dict[str, Any]]:
        """Prepared INSERTs in unlogged batches; the permission rows serialized by numpy."""
        source_rows = yield Batches("scylla: batch", self._load_source(source, tick), self.in_flight,
                                    name="source_seconds", why=_why)
        # permission_seconds: the chunks' expansion (their Steps) is not ingest
        perm_rows = yield Batches("scylla: batch", self._load_permissions(expansion, tick), self.in_flight,
                                  name="permission_seconds", steps_apart=True, why=_why)
        # bytes_written: the BATCH entries sent (statement ids, values and their lengths)
        return {
            "source_rows": source_rows, "permission_rows": perm_rows, "bytes_written": self._cql_value_bytes,
            "batch_retries": self._batch_retries,
            "method": f"closure in numpy chunk by chunk, prepared INSERTs "
            f"in unlogged batches of <= {self.batch_rows} rows of one partition, "
            f"{self.in_flight} batches in flight; permission rows serialized "
            f"by numpy straight into the BATCH frame, <= {self.fixed_batch_rows} per batch"}

    def _load_source(self, source: dict[str, Any], tick: _Ticker) -> Iterator[Batch]:
        """The relationships as stored: by object (one table per object type) and by subject."""
        # All relations of one object type together, sorted by object: a resource's whole ACL (~14 rows
        # at baseline) is one batch, where one batch per (relation, resource) averaged ~3 rows and made
        # the source ingest request-bound (3.7k rows/s measured).
        for table in dict.fromkeys(SOURCE_TABLE.values()):
            rels = [r for r in source if SOURCE_TABLE[REBAC_RELATIONS[r].object_type] == table]
            obj, sub, rel_b = _stacked(source, rels, _short)
            order = np.argsort(obj, kind="stable")
            ob = _ser_int(obj[order])
            yield from self._ingest(
                f"INSERT INTO {{ks}}.{table} (object, relation, subject) VALUES (?, ?, ?)",
                obj[order], [ob, rel_b[order].tolist(), _ser_int(sub[order])], lambda i, ob=ob: ob[i], tick)
        rels = [r for r in REVERSE if r in source]
        obj, sub, rel_b = _stacked(source, rels, str)
        code = np.repeat(np.arange(len(rels)), [len(source[r]) for r in rels])
        key = code * (1 << 32) + sub  # partition (relation, subject)
        order = np.argsort(key, kind="stable")
        rb, sb = rel_b[order].tolist(), _ser_int(sub[order])
        yield from self._ingest(
            "INSERT INTO {ks}.rel_by_subject (relation, subject, object) VALUES (?, ?, ?)",
            key[order], [rb, sb, _ser_int(obj[order])], lambda i: _routing(rb[i], sb[i]), tick)

    def _load_permissions(self, expansion: Expansion, tick: _Ticker) -> Iterator[Step | Batch]:
        """The precomputed permissions, by resource and by user, from the closure chunk by chunk (each chunk
        computed in a Step before its batches: expansion.stepped)."""
        U, R = expansion.n_users, expansion.n_resources
        for chunk in stepped(expansion.iter_resource_keys()):  # keys (resource, user)
            if isinstance(chunk, Step):
                yield chunk
                continue
            lo, _hi, manage, view = chunk
            v_res, v_user = lo + view // U, view % U
            rb = _ser_int(v_res)
            yield from self._ingest_fixed(
                "INSERT INTO {ks}.perm_by_resource (resource, user, manage) VALUES (?, ?, ?)",
                v_res, [v_res, v_user, np.isin(view, manage, assume_unique=True)], lambda i, rb=rb: rb[i],
                tick)
        for chunk in stepped(expansion.iter_user_keys()):  # keys user * R + resource
            if isinstance(chunk, Step):
                yield chunk
                continue
            for perm, k in zip(("manage", "view"), chunk, strict=True):
                ub = _ser_int(k // R)
                rk = _composite_after(perm.encode())
                yield from self._ingest_fixed(
                    f"INSERT INTO {{ks}}.perm_by_user (user, perm, resource) VALUES (?, '{perm}', ?)",
                    k // R, [k // R, k % R], lambda i, ub=ub, rk=rk: rk(ub[i]), tick)

    def _ingest(self, cql: str, key: np.ndarray, cols: list[list[bytes]], routing: Callable[[int], bytes],
                tick: _Ticker) -> Iterator[Batch]:
        """Write rows sorted by partition `key` in unlogged batches of <= batch_rows rows of one partition.
        Values come pre-serialized (numpy), so the per-row Python work is one list append; the batch still
        carries the prepared statement's id and a routing key, exactly what BatchStatement.add(prepared,
        values) would produce (cassandra-driver 3.30)."""
        qid, width = self.prep(cql).query_id, len(cols)
        # each BATCH entry: kind, id, value count, then each value with its 4-byte length
        self._cql_value_bytes += len(key) * (5 + len(qid) + 4 * width) + sum(sum(map(len, c)) for c in cols)

        def fill(batch: Any, s: int, e: int) -> None:
            add = batch._add_statement_and_params  # noqa: SLF001 - skips re-serializing each value
            if width == 2:
                c0, c1 = cols
                for i in range(s, e):
                    add(True, qid, [c0[i], c1[i]])
            else:
                for i in range(s, e):
                    add(True, qid, [c[i] for c in cols])

        return self._batches(key, fill, routing, tick, cost=SOURCE_ROW_COST)

    def _ingest_fixed(
        self, cql: str, key: np.ndarray, cols: list[np.ndarray], routing: Callable[[int], bytes],
        tick: _Ticker) -> Iterator[Batch]:
        """As _ingest, for statements whose values are all int or boolean: every row's BATCH entry is
        built by numpy in one pass and each batch body is one slice of it, no Python per row (the 13M
        permission rows of baseline-v1 were ~10 client CPU-µs each through BatchStatement.add)."""
        _encoded_batches()
        rec = _fixed_rows(self.prep(cql).query_id, cols)
        self._cql_value_bytes += rec.nbytes

        def fill(batch: Any, s: int, e: int) -> None:
            batch._statements_and_parameters = _Encoded(rec[s:e].tobytes(), e - s)  # noqa: SLF001

        return self._batches(key, fill, routing, tick, self.fixed_batch_rows)

    def _batches(
        self, key: np.ndarray, fill: Callable[[Any, int, int], None], routing: Callable[[int], bytes],
        tick: _Ticker, batch_rows: int | None = None, cost: int = 1) -> Iterator[Batch]:
        """Rows sorted by partition `key`, cut into unlogged batches of <= batch_rows rows of one partition
        (the run layer sends them, in_flight at a time); fill(batch, start, end) puts rows start..end-1 in a
        batch. Each row advances the progress by `cost`."""
        from cassandra.query import BatchStatement, BatchType

        n = len(key)
        if n == 0:
            return
        idx = np.arange(n)
        first = np.ones(n, dtype=bool)
        first[1:] = key[1:] != key[:-1]
        pos = idx - np.maximum.accumulate(np.where(first, idx, 0))  # row's position within its partition
        starts = np.flatnonzero(pos % (batch_rows or self.batch_rows) == 0).tolist()
        ends = [*starts[1:], n]
        retryable = _retryable_errors()
        ks = self.ks
        for s, e in zip(starts, ends, strict=True):
            batch = BatchStatement(batch_type=BatchType.UNLOGGED)
            fill(batch, s, e)
            batch.keyspace, batch.routing_key = ks, routing(s)  # token-aware: straight to a replica
            yield Batch(
                e - s, partial(self._send_batch, batch, retryable), advance=(e - s) * cost * tick.scale)

    def _send_batch(self, batch: Any, retryable: tuple[type[BaseException], ...]) -> None:
        """One batch, sent again when the node timed it out or shed it: the rows are plain inserts
        (idempotent). Its batch time spans its tries."""
        for tries in range(1, BATCH_TRIES + 1):
            try:
                self.session.execute_async(batch, timeout=max(self.timeout, 60.0)).result()
                return
            except retryable:
                if tries == BATCH_TRIES:
                    raise
                with _RETRIES_LOCK:
                    self._batch_retries += 1


def _why(e: Exception) -> str:
    return f"{type(e).__name__}: {e!s:.200}"


_RETRIES_LOCK = threading.Lock()


def _retryable_errors() -> tuple[type[BaseException], ...]:
    """A node's write timeout, a client-side timeout, an overloaded or bootstrapping node: worth a retry."""
    from cassandra import OperationTimedOut, WriteTimeout
    from cassandra.protocol import OverloadedErrorMessage

    return (OperationTimedOut, WriteTimeout, OverloadedErrorMessage)

def _stacked(
    source: dict, rels: list[str], name: Callable[[str], str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Objects, subjects and serialized relation names of several relations, concatenated."""
    obj = np.concatenate([source[r]["object"].to_numpy(np.int64) for r in rels])
    sub = np.concatenate([source[r]["subject"].to_numpy(np.int64) for r in rels])
    names = np.array([name(r).encode() for r in rels], dtype=object)
    return obj, sub, names[np.repeat(np.arange(len(rels)), [len(source[r]) for r in rels])]

def _routing(*parts: bytes) -> bytes:
    """Routing key of a composite partition key: each component as <length><bytes><0>."""
    return b"".join(struct.pack(">H", len(p)) + p + b"\x00" for p in parts)

def _composite_after(second: bytes) -> Callable[[bytes], bytes]:
    """Routing key of an (int, text) partition key, the text fixed."""
    tail = b"\x00" + struct.pack(">H", len(second)) + second + b"\x00"
    head = struct.pack(">H", 4)
    return lambda first: head + first + tail

class _Encoded(list):
    """The statements of a BATCH already serialized: `body` holds `count` entries in the protocol's
    layout. An empty list to everything but the patched BatchMessage.send_body."""

    def __init__(self, body: bytes, count: int):
        super().__init__()
        self.body, self.count = body, count

def _fixed_rows(query_id: bytes, cols: list[np.ndarray]) -> np.ndarray:
    """One packed record per row, the BATCH entry of a prepared statement (protocol v3-v5):
    [byte 1][short id length][id][short value count] then per value [int length][bytes]; int columns
    as 4-byte big-endian ints, bool columns as one byte."""
    fields: list[tuple] = [("kind", "u1"), ("id_len", ">u2"), ("id", "u1", (len(query_id),)), ("n", ">u2")]
    for i, c in enumerate(cols):
        fields += [(f"len{i}", ">i4"), (f"v{i}", "u1" if c.dtype == np.bool_ else ">i4")]
    rec = np.empty(len(cols[0]), dtype=np.dtype(fields))
    rec["kind"], rec["id_len"], rec["n"] = 1, len(query_id), len(cols)
    rec["id"] = np.frombuffer(query_id, dtype=np.uint8)
    for i, c in enumerate(cols):
        rec[f"len{i}"] = 1 if c.dtype == np.bool_ else 4
        rec[f"v{i}"] = c
    return rec

_PATCH_LOCK = threading.Lock()

def _encoded_batches() -> None:
    """Teach the driver's BatchMessage to write an _Encoded body: the header and tail (consistency,
    flags, keyspace...) still come from the driver's own send_body, called with no statements."""
    from cassandra import protocol

    with _PATCH_LOCK:
        original = protocol.BatchMessage.send_body
        if getattr(original, "authzbench_encoded", False):
            return

        def send_body(self: Any, f: Any, protocol_version: int) -> None:
            q = self.queries
            if not isinstance(q, _Encoded):
                return original(self, f, protocol_version)
            buf = io.BytesIO()
            self.queries = []
            try:
                original(self, buf, protocol_version)
            finally:
                self.queries = q
            head = buf.getvalue()  # [byte batch type][short 0][consistency, flags, ...]
            f.write(head[:1] + struct.pack(">H", q.count) + q.body + head[3:])

        send_body.authzbench_encoded = True  # type: ignore[attr-defined]
        protocol.BatchMessage.send_body = send_body
