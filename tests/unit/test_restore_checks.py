"""Which phases the restore check samples and which covers the heaviest user (phase_plan.RestoreChecks),
decided from the plan before the visit runs."""

from __future__ import annotations

from authzbench.config import BenchConfig
from authzbench.run.phase_plan import RestoreChecks
from authzbench.workloads.spec import PhaseSpec


def _plan(*phases: tuple[str, int]) -> list[tuple[PhaseSpec, str]]:
    return [(PhaseSpec(backend="reference", scenario=s, repeat=r), s) for s, r in phases]


def _sched(visits: int):
    return BenchConfig.of(backends=["reference"], provision="native", profile="tiny", rounds=2,
                          visits=visits).schedule


# rounds 0 and 2 run in visit 0, rounds 1 and 3 in visit 1 (visit_of)
PLAN = _plan(("write_acl", 0), ("check_negative", 0), ("mixed", 0), ("check_negative", 0),
             ("write_acl", 1), ("churn", 1), ("check_negative", 1),
             ("write_membership", 2), ("check_negative", 2),
             ("check_negative", 3))


def _sampled(checks: RestoreChecks) -> list[int]:
    return [i for i, (spec, _) in enumerate(PLAN) if checks.sampled(spec)]


def test_only_the_visits_last_writing_phase_and_the_backends_last_writing_phase_are_sample_checked():
    first, second = RestoreChecks.of(_sched(2), PLAN, 0), RestoreChecks.of(_sched(2), PLAN, 1)
    # visit 0's last writer is round 2's write_membership; the run's last is visit 1's churn (visit 1 runs
    # after)
    assert _sampled(first) == [5, 7]
    assert _sampled(second) == [5]


def test_the_heavy_user_is_checked_only_after_the_backends_last_writing_phase_of_the_run():
    for visit in (0, 1):
        checks = RestoreChecks.of(_sched(2), PLAN, visit)
        assert [i for i, (spec, _) in enumerate(PLAN) if checks.heavy_user(spec)] == [5]


def test_a_plan_without_writes_samples_and_heavy_checks_nothing():
    reads = _plan(("check_negative", 0), ("check_negative", 1))
    checks = RestoreChecks.of(_sched(1), reads, 0)
    assert not any(checks.sampled(s) or checks.heavy_user(s) for s, _ in reads)


def test_an_equal_phase_from_another_plan_is_not_taken_for_the_checked_one():
    # the plan's own objects are matched, not equal copies: a re-built spec is a different phase
    checks = RestoreChecks.of(_sched(1), PLAN, 0)
    twin = PhaseSpec(backend="reference", scenario="write_membership", repeat=2)
    assert checks.sampled(PLAN[7][0])
    assert not checks.sampled(twin) and not checks.heavy_user(twin)
