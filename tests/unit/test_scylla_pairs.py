"""Cassandra/Scylla write path: the permission rows a pair's state change writes are exactly the rows that
differ between the two states (no tombstone for a row the pair never had), without a server."""

from __future__ import annotations

import itertools

import pytest

from authzbench.systems.scylla.writes import _pair_statements

STATES = (None, "view", "manage")


def _rows(r: int, u: int, state: str | None) -> set[tuple]:
    """The rows that represent a pair's state: perm_by_resource (with its manage flag) and perm_by_user."""
    if state is None:
        return set()
    rows = {("perm_by_resource", r, u, state == "manage"), ("perm_by_user", u, "view", r)}
    return rows | ({("perm_by_user", u, "manage", r)} if state == "manage" else set())


def _apply(rows: set[tuple], stmts: list[tuple[str, tuple, tuple]]) -> set[tuple]:
    out = set(rows)
    for q, p, _partition in stmts:
        table = "perm_by_resource" if "perm_by_resource" in q else "perm_by_user"
        if table == "perm_by_resource":
            r, u = p[0], p[1]
            out = {x for x in out if x[:3] != (table, r, u)}
            if q.startswith("INSERT"):
                out.add((table, r, u, p[2]))
        else:
            u, r = p
            perm = "manage" if "'manage'" in q else "view"
            out.discard((table, u, perm, r))
            if q.startswith("INSERT"):
                out.add((table, u, perm, r))
    return out


@pytest.mark.parametrize(("old", "new"), [p for p in itertools.product(STATES, STATES) if p[0] != p[1]])
def test_a_state_change_writes_exactly_the_rows_that_differ(old, new):
    stmts = _pair_statements(7, 3, old, new)
    assert _apply(_rows(7, 3, old), stmts) == _rows(7, 3, new)
    differing = len(_rows(7, 3, old) ^ _rows(7, 3, new)) - (1 if old and new else 0)  # pbr: one row updated
    assert len(stmts) == differing
    assert all(
        part == (("r", 7) if "perm_by_resource" in q else ("u", 3, "manage" if "'manage'" in q else "view"))
        for q, _, part in stmts)
