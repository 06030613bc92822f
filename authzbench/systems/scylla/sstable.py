"""The Cassandra / ScyllaDB adapter's SSTable ingest path (scylla.py): the rows streamed to a Java helper
(systems/scylla/cassandra_bulk/SSTableBulk.java) writing sorted SSTables in token order, which the node
then imports. A mixin of ScyllaBackend: it uses the adapter's endpoint, keyspace and tables."""

from __future__ import annotations

import itertools
import math
import re
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable, Generator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from authzbench.backends.base import Step
from authzbench.backends.expansion import Expansion
from authzbench.core.errors import BackendUnavailable
from authzbench.schema.model import REBAC_RELATIONS
from authzbench.systems.scylla.tables import REVERSE, SOURCE_TABLE, _short, _Ticker
from authzbench.systems.scylla.tokens import TokenSpill, id_tokens, ring_order

# Rows a block sent to the SSTable helper; each block becomes one SSTable. Bounds the helper's memory
# (a block a table in work plus two queued: 3 int arrays of 4 MiB each) and makes a baseline load
# ~30 SSTables; written in token order each holds its own slice of the ring, so on Cassandra's
# UnifiedCompactionStrategy (cql.cql) none overlaps another and none needs merging.
SSTABLE_BLOCK_ROWS = 1 << 20
# The permission rows as spilled to disk before they are written in token order (cql_tokens.TokenSpill).
_RESOURCE_ROW = np.dtype([("resource", "<i4"), ("user", "<i4"), ("manage", "u1")])
_USER_ROW = np.dtype([("user", "<i4"), ("perm", "u1"), ("resource", "<i4")])
# The notes each step's seconds go to: the SSTables' writing is the source's and the permissions' together.
SOURCE_STEP = ("source_seconds", "sstable_write_seconds")
PERMISSION_STEP = ("permission_seconds", "sstable_write_seconds")


class SSTableIngest:
    """load()'s `sstable` path."""

    def _load_sstables(self, source: dict[str, Any], expansion: Expansion, tick: _Ticker
                       ) -> Generator[Step, Any, dict[str, Any]]:
        """Every table written as SSTables by the helper, then imported by the node."""
        work = Path(self.endpoint.get("data_dir") or tempfile.gettempdir()) / "bulk"  # same disk: a move
        work.mkdir(parents=True, exist_ok=True)
        out = Path(tempfile.mkdtemp(prefix="sstables-", dir=work))
        try:
            with _SSTableWriter(self._bulk_cmd(), out, self.ks, self.sql["tables"]) as w:
                source_rows = yield Step(SOURCE_STEP, lambda: self._sstable_source(w, source, tick))
                perm_rows = yield from self._sstable_permissions(w, expansion, tick, out)
                written = yield Step(PERMISSION_STEP, w.finish)
            self._compaction_s = None
            yield Step(
                "import_seconds", lambda: self._import_sstables({t: out / self.ks / t for t in written}))
        finally:
            shutil.rmtree(out, ignore_errors=True)
        return {"source_rows": source_rows, "permission_rows": perm_rows,
                "compaction_seconds": self._compaction_s,
                "bytes_written": sum(t["bytes"] for t in written.values()),
                "sstables": sum(t["sstables"] for t in written.values()),
                "method": f"closure in numpy chunk by chunk, rows streamed to a Java helper "
                f"writing SSTables in token order (CQLSSTableWriter's sorted writer, one SSTable "
                f"per <= {SSTABLE_BLOCK_ROWS:,} rows, each a slice of the ring), then imported by the node "
                f"({self._import_how()}"
                f"{', its compactions run and waited for' if self._compaction_s is not None else ''})"}

    def _sstable_source(self, w: _SSTableWriter, source: dict[str, Any], tick: _Ticker) -> int:
        """The source tables as the CQL path writes them, as dictionary-coded columns."""
        rows = 0
        for table in dict.fromkeys(SOURCE_TABLE.values()):
            rels = [r for r in source if SOURCE_TABLE[REBAC_RELATIONS[r].object_type] == table]
            obj, sub, words, codes = _coded(source, rels, _short)
            order = _lex_order(obj, codes, sub)  # by partition, then clustering (relation, subject)
            order = order[ring_order(obj[order], id_tokens(int(obj.max()) + 1))]  # partitions in ring order
            w.table(table, "object,relation,subject", "iti", words)
            rows += w.rows(table, [obj[order], codes[order], sub[order]], tick)
            w.close(table)
        rels = [r for r in REVERSE if r in source]
        obj, sub, words, codes = _coded(source, rels, str)
        order = _lex_order(codes, sub, obj)  # partition (relation, subject), clustering object
        n_sub = int(sub.max()) + 1
        tokens = np.concatenate([id_tokens(n_sub, before=word.encode()) for word in words])
        order = order[ring_order(codes[order].astype(np.int64) * n_sub + sub[order], tokens)]
        w.table("rel_by_subject", "relation,subject,object", "tii", words)
        rows += w.rows("rel_by_subject", [codes[order], sub[order], obj[order]], tick)
        w.close("rel_by_subject")
        return rows

    def _sstable_permissions(self, w: _SSTableWriter, expansion: Expansion, tick: _Ticker, work: Path
                             ) -> Generator[Step, Any, int]:
        """Both permission tables from the closure, chunk by chunk (each chunk computed in a closure Step),
        spilled to per-token-range files (TokenSpill), then written range by range in token order, as the CQL
        path writes them."""
        U, R = expansion.n_users, expansion.n_resources
        spills = yield Step(PERMISSION_STEP, lambda: _spills(expansion, work))
        by_resource, by_users = iter(expansion.iter_resource_keys()), iter(expansion.iter_user_keys())
        while True:
            # keys (resource - lo) * U + user, then user * R + resource
            res_chunk = yield Step("closure_seconds", lambda: next(by_resource, None))
            user_chunk = yield Step("closure_seconds", lambda: next(by_users, None))
            if res_chunk is None and user_chunk is None:
                break
            yield Step(PERMISSION_STEP, partial(_spill, res_chunk, user_chunk, spills, U, R, tick))
        res_tok, user_tok, by_res, by_user = spills
        return (yield Step(
                    PERMISSION_STEP, lambda: self._sstable_ranges(w, by_res, by_user, res_tok, user_tok, tick)
                ))

    @staticmethod
    def _sstable_ranges(w: _SSTableWriter, by_res: TokenSpill, by_user: TokenSpill, res_tok: np.ndarray,
                        user_tok: np.ndarray, tick: _Ticker) -> int:
        """Each spilled range's partitions put in token order (ring_order: whole partitions move, their rows
        in clustering order; a stable argsort of every row's token gave the same bytes, the large profile's
        ranges in 9.3 s against 6.2) and sent, the two tables' ranges in turn."""
        rows = 0
        w.table("perm_by_resource", "resource,user,manage", "iib", [])
        w.table("perm_by_user", "user,perm,resource", "iti", ["manage", "view"])
        flat_user_tok = user_tok.reshape(-1)  # partition (perm code, user) at code * U + user
        for r, u in itertools.zip_longest(by_res.ranges(), by_user.ranges()):
            if r is not None:
                r = r[ring_order(r["resource"], res_tok)]
                rows += w.rows(
                    "perm_by_resource", [r["resource"], r["user"], r["manage"].astype(bool)], tick, 0.5)
            if u is not None:
                u = u[ring_order(u["perm"].astype(np.int64) * user_tok.shape[1] + u["user"], flat_user_tok)]
                rows += w.rows("perm_by_user", [u["user"], u["perm"], u["resource"]], tick, 0.5)
        w.close("perm_by_resource")
        w.close("perm_by_user")
        return rows

    def _bulk_cmd(self) -> list[str]:
        """The SSTable helper's command, from the endpoint: natively the built helper itself; under compose or
        external, one that builds it on first use (its declaration's `tools`, added by provisioning; an
        adapter never provisions)."""
        cmd = self.endpoint.get("bulk_cmd")
        if not cmd:
            raise BackendUnavailable(
                "scylla: ingest=sstable needs the SSTable helper, and the endpoint names none (bulk_cmd)")
        return list(cmd)

    def _import_how(self) -> str:
        return ("nodetool import over JMX" if self.endpoint.get("jmx_port") else
                "uploaded into the container, nodetool refresh --load-and-stream")

    def _import_sstables(self, dirs: dict[str, Path]) -> None:
        """Native Cassandra: nodetool import's JMX call per table (files moved into the table). Compose
        (ScyllaDB, untested here): copy each table's files into its upload directory in the container,
        then `nodetool refresh --load-and-stream`."""
        if self.endpoint.get("jmx_port"):
            proc = subprocess.run(
                [*self._bulk_cmd(), "import", self.endpoint["hosts"][0], str(self.endpoint["jmx_port"]),
                 self.ks, *(f"{t}={d}" for t, d in dirs.items())],
                capture_output=True, text=True, timeout=3600)
            if proc.returncode != 0 or "done" not in proc.stdout:
                raise BackendUnavailable(f"scylla: SSTable import failed (exit {proc.returncode}): "
                                         f"{_last_line(proc.stdout + proc.stderr)}")
            if m := re.search(r"^compacted seconds ([\d.]+)$", proc.stdout, re.M):
                self._compaction_s = float(m.group(1))
            return
        compose = list(self.endpoint["compose_cmd"])
        service = self.endpoint["compose_service"]
        for table, d in dirs.items():
            found = subprocess.run([*compose, "exec", "-T", service, "sh", "-c",
                                    f"ls -d /var/lib/scylla/data/{self.ks}/{table}-*"],
                                   capture_output=True, text=True, timeout=60)
            target = (found.stdout.split() or [""])[0]
            if found.returncode != 0 or not target:
                raise BackendUnavailable(f"scylla: no data directory for {self.ks}.{table} in {service}")
            for cmd in ([*compose, "cp", f"{d}/.", f"{service}:{target}/upload/"],
                        [*compose, "exec", "-T", service, "nodetool", "refresh", self.ks, table,
                         "--load-and-stream"]):
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
                if proc.returncode != 0:
                    raise BackendUnavailable(f"scylla: docker compose {cmd[len(compose)]} failed: "
                                             f"{_last_line(proc.stdout + proc.stderr)}")


def _spills(expansion: Expansion, work: Path) -> tuple[np.ndarray, np.ndarray, TokenSpill, TokenSpill]:
    """Each permission table's partition tokens and its (empty) spill."""
    U, R = expansion.n_users, expansion.n_resources
    view_n, manage_n = expansion.total("view"), expansion.total("manage")
    res_tok = id_tokens(R)
    # the dictionary's order
    user_tok = np.stack([id_tokens(U, after=p.encode()) for p in ("manage", "view")])
    return (res_tok, user_tok, TokenSpill(work, "perm_by_resource", _RESOURCE_ROW, view_n),
            TokenSpill(work, "perm_by_user", _USER_ROW, view_n + manage_n))


def _spill(
    res_chunk: tuple | None, user_chunk: tuple | None, spills: tuple, U: int, R: int, tick: _Ticker) -> None:
    """One chunk of each permission table into its spill (`spills` as _spills made them), each row keyed by
    its partition's token."""
    res_tok, user_tok, by_res, by_user = spills
    if res_chunk is not None:
        lo, _hi, manage, view = res_chunk
        rows = np.empty(len(view), _RESOURCE_ROW)
        rows["resource"], rows["user"] = lo + view // U, view % U
        rows["manage"] = np.isin(view, manage, assume_unique=True)
        by_res.add(res_tok[rows["resource"]], rows)
        tick.done += len(rows) / 2
    for code, k in enumerate(user_chunk or ()):  # keys user * R + resource: manage, then view
        rows = np.empty(len(k), _USER_ROW)
        rows["user"], rows["perm"], rows["resource"] = k // R, code, k % R
        by_user.add(user_tok[code, rows["user"]], rows)
        tick.done += len(rows) / 2
    tick.flush()


class _SSTableWriter:
    """The SSTable helper process (SSTableBulk.java `write`): tables declared, then blocks of rows sent as
    big-endian column arrays (its frame format is in its source), then closed; the pipe's back-pressure
    bounds what is in flight. Its stderr goes to a log beside the files."""

    def __init__(self, cmd: list[str], out: Path, ks: str, schema: list[str]):
        self.ks, self.out = ks, out
        self.schema = {re.search(r"TABLE\s+(?:IF NOT EXISTS\s+)?\S+\.(\w+)", q).group(1):  # type: ignore[union-attr]
                       re.sub(r"IF NOT EXISTS\s+", "", q) for q in schema if " TABLE " in q}
        self.ids: dict[str, int] = {}
        self.log = out / "helper.log"
        self.proc = subprocess.Popen([*cmd, "write", str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(self.log, "wb"))  # noqa: SIM115 - the child owns it
        assert self.proc.stdin is not None
        self.pipe = self.proc.stdin

    def __enter__(self) -> _SSTableWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _send(self, data: bytes) -> None:
        try:
            self.pipe.write(data)
        except (BrokenPipeError, OSError):
            self.proc.wait()
            raise BackendUnavailable(f"scylla: the SSTable helper stopped (exit {self.proc.returncode}): "
                                     f"{_last_line(self.log.read_text(errors='replace'))}") from None

    def table(self, name: str, columns: str, kinds: str, words: list[str]) -> None:
        self.ids[name] = len(self.ids) + 1
        insert = (f"INSERT INTO {self.ks}.{name} ({columns.replace(',', ', ')}) "
                  f"VALUES ({', '.join('?' * len(kinds))})")
        self._send(struct.pack(">ii", 1, self.ids[name]) + b"".join(
            _utf(x) for x in (self.schema[name], insert, columns, kinds)) + struct.pack(">i", len(words))
                   + b"".join(_utf(x) for x in words))

    def rows(self, name: str, cols: list[np.ndarray], tick: _Ticker, weight: float = 1.0) -> int:
        """Rows grouped by partition, in blocks of <= SSTABLE_BLOCK_ROWS (each one SSTable); each row
        counts `weight` of a row's progress."""
        n = len(cols[0])
        for s in range(0, n, SSTABLE_BLOCK_ROWS):
            e = min(n, s + SSTABLE_BLOCK_ROWS)
            body = [np.ascontiguousarray(c[s:e], dtype="u1" if c.dtype == np.bool_ else ">i4").tobytes()
                    for c in cols]
            self._send(struct.pack(">iii", 2, self.ids[name], e - s) + b"".join(body))
            tick.done += (e - s) * weight
            tick.flush()
        return n

    def close(self, name: str) -> None:
        self._send(struct.pack(">ii", 3, self.ids[name]))

    def finish(self) -> dict[str, dict[str, float]]:
        """Waits for every SSTable; per table its rows, SSTables, bytes and seconds (the helper's lines)."""
        self._send(struct.pack(">i", 0))
        out, _ = self.proc.communicate(timeout=3600)
        lines = out.decode(errors="replace").splitlines()
        if self.proc.returncode != 0 or "done" not in lines:
            raise BackendUnavailable(f"scylla: the SSTable helper failed (exit {self.proc.returncode}): "
                                     f"{_last_line(self.log.read_text(errors='replace'))}")
        tables = {}
        for line in lines:  # table NAME rows N sstables S bytes B seconds T
            f = line.split()
            if f and f[0] == "table":
                tables[f[1]] = {k: float(v) for k, v in zip(f[2::2], f[3::2], strict=True)}
        return tables

def _utf(text: str) -> bytes:
    """Java's DataInput.readUTF: a 2-byte length, then the bytes (ASCII here)."""
    b = text.encode()
    return struct.pack(">H", len(b)) + b

def _last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return (lines[-1] if lines else "no output")[:300]

def _coded(source: dict, rels: list[str], name: Callable[[str], str]
           ) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray]:
    """Objects and subjects of several relations, concatenated, with their relation names as codes into
    the sorted list of names (so code order is the text's clustering order)."""
    # int32 ids and int8 codes, as the helper receives them: at xl (52M source rows) int64 columns, their
    # sort order and the sorted copies took the suite to 3.4 GiB during this step, over its 4 GB bound
    words = sorted({name(r) for r in rels})
    obj = np.concatenate([source[r]["object"].to_numpy(np.int32) for r in rels])
    sub = np.concatenate([source[r]["subject"].to_numpy(np.int32) for r in rels])
    codes = np.repeat(
        np.array([words.index(name(r)) for r in rels], dtype=np.int8), [len(source[r]) for r in rels])
    return obj, sub, words, codes

def _lex_order(*cols: np.ndarray) -> np.ndarray:
    """np.lexsort's order of non-negative int columns, the most significant first, as one stable sort of
    a combined int64 key when it fits: the tables come sorted by object, relation by relation, so that
    sort merges a few sorted runs (xl rel_resource, 37.9M rows: 1.1 s where lexsort took 9.0 s)."""
    widths = [int(c.max()) + 1 if len(c) else 1 for c in cols]
    if math.prod(widths) >= 2**63:
        return np.lexsort(cols[::-1])
    key = cols[0].astype(np.int64)
    for c, w in zip(cols[1:], widths[1:], strict=True):
        key *= w
        key += c
    return np.argsort(key, kind="stable")
