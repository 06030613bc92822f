"""Sentences of the report that said what their own numbers contradicted (issue 67, item 6): each is computed
from the figures or records beside it."""

from __future__ import annotations

from authzbench.report import decision
from tests.unit.test_report_findings import NET, Run


def test_the_read_leader_pays_only_where_its_write_rank_is_not_first():
    line = decision._leader_line("postgres", [(True, "membership write p95 5.32 ms, rank 1"),
                                              (False, "rows touched 360 rows, rank 4"),
                                              (True, "stale allows 0, rank 1")])
    assert "pays on the write side in 1 of 3 write needs: rows touched 360 rows, rank 4;" in line
    assert "it leads the other 2: membership write p95 5.32 ms, rank 1; stale allows 0, rank 1." in line


def test_a_read_leader_first_in_every_write_need_pays_nothing():
    line = decision._leader_line("postgres", [(True, "a, rank 1"), (True, "b, rank 1")])
    assert "pays nothing on the write side: rank 1 in all 2 write needs" in line and " pays on" not in line


def test_a_read_leader_behind_in_every_write_need_pays_in_every_one():
    line = decision._leader_line("postgres", [(False, "a, rank 2"), (False, "b, rank 3")])
    assert "pays on the write side in every write need: a, rank 2; b, rank 3." in line and "leads" not in line


def test_the_tier_line_names_the_mode_each_engine_read_in_from_its_server_record():
    from authzbench.report import overview

    run = Run().server("postgres", NET)
    for b, mode in [("spicedb-pg", "minimize_latency"), ("openfga", "minimize_latency"),
                    ("permify", "at_least_as_fresh")]:
        run.server(b, {**NET, "label": b, "consistency": mode})
    assert overview.session_modes(run.data()) == "spicedb-pg, openfga minimize_latency; permify at_least_as_fresh"
