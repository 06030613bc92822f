"""The k6 reproduction's executor with a fake engine: VUs busy for a request plus the think time cap the
achieved rate and drop what is due while none is free, no think time lets every iteration through, wrong
answers and failures are counted, and the id draws repeat the previous id as often as the script does."""

from __future__ import annotations

import time

import numpy as np

from authzbench.core.metrics import decode
from authzbench.core.records import Loadtest
from authzbench.measure import k6, timing
from authzbench.measure.k6 import run_plan
from authzbench.report.loadtest import render
from authzbench.workloads.loadtest import PLANS, LoadTestPlan, k6_ids, plan_inputs


class Fake:
    def __init__(self, answer: bool = True, fail_every: int = 0, delay_s: float = 0.001):
        self.answer, self.fail_every, self.delay_s, self.n = answer, fail_every, delay_s, 0

    def check(self, user: int, perm: str, obj: int) -> bool:
        self.n += 1
        time.sleep(self.delay_s)
        if self.fail_every and self.n % self.fail_every == 0:
            raise ConnectionError("gone")
        return self.answer

    def close(self) -> None:
        pass


def _plan(**kw) -> LoadTestPlan:
    return LoadTestPlan("t", start_rate=40.0, stages=((40.0, 2.0),), threads=4, **kw)


def test_published_document_schedules_its_347050_iterations():
    assert PLANS["published"].scheduled() == 347_050  # 75,369 done + 271,664 dropped in the document, +17 due


def test_think_time_with_few_vus_caps_the_rate_and_drops_the_rest():
    plan = _plan(max_vus=5, think_s=1.0)
    res = run_plan(plan, Fake, [(1, 2, True)])
    assert res.scheduled == 80 and res.iterations + res.dropped == 80
    assert 5 <= res.iterations <= 15, res.iterations  # ~5 VUs x 2 s / (1 s + request)
    assert res.max_busy_vus == 5


def test_without_think_time_every_iteration_runs():
    # 20 VUs: with a 1 s think time they would finish at most ~40 of the 80; without, all of them, even when a
    # loaded machine stalls the 4 client threads for a few hundred ms (with 5 VUs, one was dropped so)
    res = run_plan(_plan(max_vus=20, think_s=0.0), Fake, [(1, 2, True)])
    assert res.dropped == 0 and res.iterations == 80 and res.mismatches == 0 and res.allowed == 80


def test_wrong_answers_and_failures_are_counted_apart():
    res = run_plan(_plan(max_vus=50, think_s=0.0), lambda: Fake(answer=False, fail_every=4), [(1, 2, True)])
    assert res.errors > 0 and res.error_types == {"ConnectionError": res.errors}
    assert res.mismatches == res.iterations - res.errors


def test_ids_repeat_the_previous_id_as_often_as_the_script_says():
    ids = k6_ids(20_000, 100_000, 100_000, 0.3, seed=1)
    flat = ids.reshape(-1)
    repeats = np.mean(flat[1:] == flat[:-1])
    assert 0.27 < repeats < 0.33
    inputs = plan_inputs(PLANS["corrected"], 50, 70, lambda u, c: c % 2 == 0, 1000)
    assert all(u < 70 and c < 70 for u, c, _ in inputs)  # dataset ids only (users < 50 unless reused)


def test_the_table_has_the_documents_columns_and_its_published_row():
    res = run_plan(_plan(max_vus=20, think_s=0.0), Fake, [(1, 2, True)])
    rec = Loadtest(backend="fake", label="Fake 1.0", variant="corrected", plan={}, dataset_hash="",
                   **res.record())
    md = render([rec], ["context"])
    assert "| 745.9 |" in md and "| 271,664 |" in md and "p(95) (ms)" in md and "dropped iterations" in md
    assert "| Fake 1.0 | corrected |" in md and "80 out of 80" in md


def test_every_request_is_timed_by_the_shared_measurement_and_its_latency_recorded(monkeypatch):
    seen: list[timing.Timed] = []

    def spy(call):
        t = timing.timed(call)
        seen.append(t)
        return t

    monkeypatch.setattr(k6, "timed", spy)
    rec = run_plan(_plan(max_vus=50, think_s=0.0), lambda: Fake(delay_s=0.02), [(1, 2, True)]).record()
    sent, intended = decode(rec["duration_hist"]), decode(rec["from_intended_hist"])
    assert len(seen) == rec["iterations"] == sent.get_total_count() == intended.get_total_count() == 80
    assert sent.get_min_value() >= 20_000  # µs: the fake's 20 ms per check is in every latency
    recorded = sorted(max(1, (t.end_ns - t.sent_ns) // 1000) for t in seen)
    # the spied calls' own latencies
    assert sent.get_max_value() == sent.get_highest_equivalent_value(recorded[-1])
    assert rec["checked"] == 80 and rec["mismatches"] == 0


def test_a_wrong_answer_is_a_mismatch_with_its_arguments_and_a_right_one_is_not():
    inputs = [(1, 2, True), (3, 4, False)]  # the fake allows everything: the second input's answer is wrong
    rec = run_plan(_plan(max_vus=50, think_s=0.0), Fake, inputs).record()
    assert rec["iterations"] == rec["checked"] == 80 and rec["mismatches"] == 40 and rec["allowed"] == 80
    assert rec["examples"][0] == {"args": [3, "view_content", 4], "expected": False, "got": True}
