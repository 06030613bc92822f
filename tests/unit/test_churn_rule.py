from authzbench.workloads.churn import Step, why_not_held


def _step(**kw) -> Step:
    base = dict(read_p95_ms=5.0, scheduled=60, late=0, never_visible=0, lag_p95_s=0.01)
    return Step(**{**base, **kw})


def test_a_step_with_fast_reads_on_time_writes_and_fresh_changes_holds():
    assert why_not_held(_step(), slo_ms=25.0) == ""


def test_a_step_fails_on_slow_reads_late_writes_unseen_or_stale_changes():
    assert "SLO" in why_not_held(_step(read_p95_ms=30.0), slo_ms=25.0)
    assert "behind" in why_not_held(_step(late=7), slo_ms=25.0)
    assert why_not_held(_step(late=6), slo_ms=25.0) == ""  # 10% late is still keeping up
    assert "never visible" in why_not_held(_step(never_visible=1), slo_ms=25.0)
    assert "lag" in why_not_held(_step(lag_p95_s=12.0), slo_ms=25.0)
    assert "no check" in why_not_held(_step(read_p95_ms=None), slo_ms=25.0)


def test_a_reasons_figure_reads_as_the_reports_tables_print_it():
    assert why_not_held(_step(read_p95_ms=1887.0), slo_ms=25.0) == "check p95 1,887 ms over the 25 ms SLO"
    assert why_not_held(_step(read_p95_ms=37.64), slo_ms=25.0) == "check p95 37.6 ms over the 25 ms SLO"
