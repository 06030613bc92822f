"""The SSTable path's ordering helpers (systems/scylla/tokens.py, scylla_sstable._lex_order): rows regrouped
in ring order without losing or splitting a partition, spilled ranges that cover the ring in order, and the
combined-key sort equal to np.lexsort. The tokens themselves are checked against a real node in
tests/backends/test_scylla.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from authzbench.systems.scylla.sstable import _lex_order
from authzbench.systems.scylla.tokens import TokenSpill, id_tokens, ring_order


def test_ring_order_moves_whole_partitions_into_token_order_keeping_their_rows_in_order():
    rng = np.random.default_rng(1)
    key = np.sort(rng.integers(0, 500, 20_000))
    clustering = np.arange(len(key))  # rows already in clustering order within each partition
    tokens = id_tokens(500)
    o = ring_order(key, tokens)
    assert sorted(o.tolist()) == list(range(len(key)))
    t = tokens[key[o]]
    assert np.all(t[1:] >= t[:-1])
    same = key[o][1:] == key[o][:-1]
    assert np.all(clustering[o][1:][same] > clustering[o][:-1][same])


def test_combined_key_sort_equals_lexsort_and_falls_back_when_it_cannot_fit():
    rng = np.random.default_rng(2)
    a, b, c = (rng.integers(0, n, 50_000).astype(np.int32) for n in (3_000, 7, 100_000))
    assert np.array_equal(_lex_order(a, b, c), np.lexsort((c, b, a)))
    big = np.array([2**31 - 1, 0, 5], np.int64)
    assert np.array_equal(_lex_order(big, big, big), np.lexsort((big, big, big)))


def test_spilled_ranges_come_back_in_ring_order_with_every_row(tmp_path, monkeypatch):
    monkeypatch.setattr(TokenSpill, "SPILL_ROWS", 1_000)
    dtype = np.dtype([("id", "<i4")])
    tokens = id_tokens(10_000)
    spill = TokenSpill(tmp_path, "t", dtype, 10_000)
    assert spill.bits == 4
    for lo in range(0, 10_000, 2_500):  # four chunks, as the closure's come
        rows = np.zeros(2_500, dtype)
        rows["id"] = np.arange(lo, lo + 2_500)
        spill.add(tokens[rows["id"]], rows)
    ranges = [tokens[r["id"]] for r in spill.ranges()]
    assert sum(len(r) for r in ranges) == 10_000 and len(ranges) == 16
    assert all(a.max() < b.min() for a, b in itertools.pairwise(ranges))
    assert list(spill.dir.iterdir()) == []


def test_a_table_beyond_two_to_the_sixteen_spill_ranges_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(TokenSpill, "SPILL_ROWS", 1)
    TokenSpill(tmp_path, "fits", np.dtype([("id", "<i4")]), 1 << 16)
    with pytest.raises(ValueError, match="2\\^16 spill ranges"):
        TokenSpill(tmp_path, "too-many", np.dtype([("id", "<i4")]), (1 << 16) + 1)
