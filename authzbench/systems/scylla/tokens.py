"""Cassandra's partition tokens in numpy, for the SSTable bulk path (scylla.py): rows written in token order
make SSTables that each hold one slice of the ring, so the node has nothing to merge after importing them.

Written in the order the closure comes (user or resource order), every 1M-row SSTable spanned the whole
ring and overlapped all the others: a baseline load spent 10-13 of its 24-31 s in the compactions that
followed, `large` 96 of 154 s (report 20261126-231859), and `xl` (1,408 SSTables) was expected past the
30-minute bound. So the permission rows go first to per-token-range files on disk (`TokenSpill`), and
are read back range by range, each range sorted by token before it becomes SSTables.

Only the layout depends on these tokens being right: the helper sorts each block by the node's own
partitioner, so a wrong token here costs overlap (compaction time), never a wrong row.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

_C1, _C2 = np.uint64(0x87C37B91114253D5), np.uint64(0x4CF5AD432745937F)
_U = np.uint64


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U(r)) | (x >> _U(64 - r))


def _fmix(k: np.ndarray) -> np.ndarray:
    k = k ^ (k >> _U(33))
    k = k * _U(0xFF51AFD7ED558CCD)
    k = k ^ (k >> _U(33))
    k = k * _U(0xC4CEB9FE1A85EC53)
    return k ^ (k >> _U(33))


def murmur3_tokens(keys: np.ndarray) -> np.ndarray:
    """Murmur3Partitioner tokens (int64) of serialized partition keys, an (n, length) uint8 array: the
    first half of Cassandra's MurmurHash.hash3_x64_128 with seed 0, including its reading of the tail's
    bytes as signed (sign-extended) values."""
    n, length = keys.shape
    h1, h2 = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    with np.errstate(over="ignore"):
        for b in range(0, length - length % 16, 16):
            k1 = np.ascontiguousarray(keys[:, b:b + 8]).view("<u8").ravel()
            k2 = np.ascontiguousarray(keys[:, b + 8:b + 16]).view("<u8").ravel()
            h1 ^= _rotl(k1 * _C1, 31) * _C2
            h1 = (_rotl(h1, 27) + h2) * _U(5) + _U(0x52DCE729)
            h2 ^= _rotl(k2 * _C2, 33) * _C1
            h2 = (_rotl(h2, 31) + h1) * _U(5) + _U(0x38495AB5)
        tail = keys[:, length - length % 16:].view(np.int8).astype(np.int64).view(np.uint64)
        k1, k2 = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
        for i in range(tail.shape[1]):
            if i < 8:
                k1 ^= tail[:, i] << _U(8 * i)
            else:
                k2 ^= tail[:, i] << _U(8 * (i - 8))
        if tail.shape[1] > 8:
            h2 ^= _rotl(k2 * _C2, 33) * _C1
        if tail.shape[1]:
            h1 ^= _rotl(k1 * _C1, 31) * _C2
        h1 ^= _U(length)
        h2 ^= _U(length)
        h1 = h1 + h2
        h2 = h2 + h1
        h1, h2 = _fmix(h1), _fmix(h2)
        t = (h1 + h2).view(np.int64)
    t[t == np.iinfo(np.int64).min] = np.iinfo(np.int64).max  # Murmur3Partitioner.normalize
    return t


def _int_key(values: np.ndarray) -> np.ndarray:
    """An int column's serialized values (4 bytes, big-endian), as an (n, 4) uint8 array."""
    return np.ascontiguousarray(values, dtype=">i4").view(np.uint8).reshape(-1, 4)


def _component(p: np.ndarray) -> list[np.ndarray]:
    """A composite key's component: <2-byte length><bytes><0>."""
    n, k = p.shape
    return [np.broadcast_to(np.array([k >> 8, k & 0xFF], np.uint8), (n, 2)), p, np.zeros((n, 1), np.uint8)]


def id_tokens(n: int, before: bytes | None = None, after: bytes | None = None) -> np.ndarray:
    """Tokens of the partition keys of ids 0..n-1: an int key, or an (int, text) / (text, int) composite
    key whose text is `after` / `before`. Per id, not per row: a row's token is a lookup (at xl the
    source rows' keys, one row each, would have taken GBs)."""
    out = np.empty(n, np.int64)
    for lo in range(0, n, 1 << 20):
        ids = _int_key(np.arange(lo, min(n, lo + (1 << 20))))
        if before is None and after is None:
            keys = ids
        else:
            text = np.frombuffer(before if before is not None else after, np.uint8)
            text = np.broadcast_to(text, (len(ids), len(text)))
            parts = [text, ids] if before is not None else [ids, text]
            keys = np.concatenate([c for part in parts for c in _component(part)], axis=1)
        out[lo:lo + len(ids)] = murmur3_tokens(keys)
    return out


def ring_order(key: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Given rows grouped by partition id `key` (each partition's rows consecutive; tokens[id] its token), the
    order that moves each partition whole, its rows in their order, so that partitions follow ring order.
    Sorting the rows again with the token's rank as the first key doubled the xl source tables' sort
    (rel_resource, 37.9M rows: 19.9 s before its first row was sent, 10.6 s in id order); this sorts the
    distinct partitions only."""
    n = len(key)
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1]))) if n else np.zeros(0, np.int64)
    lengths = np.diff(np.append(starts, n))
    o = np.argsort(tokens[key[starts]], kind="stable")
    first, lengths = starts[o], lengths[o]
    dtype = np.int32 if n < 2**31 else np.int64
    shift = (first - (np.cumsum(lengths) - lengths)).astype(dtype)
    return np.repeat(shift, lengths) + np.arange(n, dtype=dtype)


class TokenSpill:
    """One table's rows in 2^bits files on disk, each one range of the ring, appended chunk by chunk and
    read back range by range: memory is bounded by a range (~SPILL_ROWS rows), not the table."""

    SPILL_ROWS = 4 << 20  # rows a range holds on average: ~4M x (9 B + sort) ~ 150 MB in memory at once

    def __init__(self, root: Path, name: str, dtype: np.dtype, n_rows: int):
        self.dir = root / f"spill-{name}"
        self.dir.mkdir(parents=True)
        self.dtype = dtype
        self.bits = max(0, math.ceil(math.log2(max(n_rows, 1) / self.SPILL_ROWS)))
        if self.bits > 16:
            raise ValueError(f"{name}: {n_rows:,} rows are more than 2^16 spill ranges hold")

    def _range(self, tokens: np.ndarray) -> np.ndarray:
        # 16-bit range numbers: numpy's stable sort of them is a radix sort (20M rows: 0.27 s, against
        # 3.4 s as int64); 2^16 ranges of SPILL_ROWS would be 2^38 rows.
        if not self.bits:
            return np.zeros(len(tokens), np.uint16)
        return ((tokens.view(np.uint64) ^ _U(1 << 63)) >> _U(64 - self.bits)).astype(np.uint16)

    def add(self, tokens: np.ndarray, rows: np.ndarray) -> None:
        """Rows (a record array of `dtype`) with their partitions' tokens, appended to their ranges' files
        (a stable sort: each range keeps the rows' order)."""
        r = self._range(tokens)
        order = np.argsort(r, kind="stable")
        bounds = np.concatenate(([0], np.cumsum(np.bincount(r, minlength=1 << self.bits))))
        rows = rows[order]
        for i in np.flatnonzero(np.diff(bounds)):
            with open(self.dir / str(i), "ab") as f:
                rows[bounds[i]:bounds[i + 1]].tofile(f)

    def ranges(self):
        """Each range's rows, in ring order; its file deleted once read."""
        for i in range(1 << self.bits):
            path = self.dir / str(i)
            if path.exists():
                rows = np.fromfile(path, dtype=self.dtype)
                path.unlink()
                yield rows
