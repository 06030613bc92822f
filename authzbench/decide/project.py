"""The needs judged at the target size: each survivor's figures at every size the decide run measured, each
need carried to the target along a power law in relationships, with the error the same method made on
what the run did measure.

A need's figure per stage is the report's own figure (figures.cell / best_rate, churn.sustainable,
freshness.revocations), read from the stage's results directory, so the decision report shows the value the
stage's own report shows. The projection is the size sweep's (report/sweep/projected.py: `grown`, from the
largest size measured along the exponent fitted on the sizes measured, the range its rounds and the
exponent's interval allow). The method's error: the largest size measured, projected from the sizes below
it, against what it measured (error = projected / measured - 1).

A need is judged so (T its threshold, v the figure):
- measured at a stage of the target's size (within 5%, or larger: the run could reach it): meets when its
  whole interval lies on the good side of T, fails when it lies on the bad side, undecided across T;
- else projected: r = T / v for a cost (lower is better), v / T for a capacity; with e the method's error,
  meets when r >= 1 + |e|, fails when r <= 1 / (1 + |e|), unknown between (or without an error to judge by:
  fewer than two sizes);
- stale allows (a count of 0 or more, no power law through a 0) are judged where measured, at the largest
  size, labelled with that size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from authzbench.core.projection import Range
from authzbench.decide.target import Target
from authzbench.report import churn, freshness
from authzbench.report.core.data import RunData, load_run
from authzbench.report.core.figures import best_rate, cell
from authzbench.report.core.frames import scenarios_measured
from authzbench.report.sweep import projected

MEETS, FAILS = "meets (measured)", "fails (measured)"
MEETS_P, FAILS_P, UNKNOWN, UNDECIDED = "meets (projected)", "fails (projected)", "unknown", "undecided"
STATUSES = (MEETS, MEETS_P, FAILS, FAILS_P, UNKNOWN, UNDECIDED)
# A stage this close under the target's size measured it: the profiles land within 5% of a round size
# (generator.profiles: large is 4,0xx,xxx relationships for a "4M" target).
AT_SIZE = 0.95
CHECK = "check_view_via_group_member"  # the decision summary's check: a grant through one group
LOOKUP = "lookup_resources_manage_super"  # the heavy user's lookup, the size sweep's


@dataclass(frozen=True)
class Need:
    name: str  # the decide.json verdicts' "need"
    title: str
    unit: str
    higher_is_better: bool
    k0: float  # the exponent assumed over one size (projection.DEFAULT_EXPONENT's: costs flat)


NEEDS = {
    "checks": Need("checks", "check p95 via a group", "ms", False, 0.0),
    "throughput": Need("throughput", "check throughput, best worker count", "checks/s", True, 0.0),
    "churn": Need("churn", "sustainable structural churn", "changes/s", True, 0.0),
    "lookups": Need("lookups", "heavy-user lookup throughput", "lookups/s", True, 0.0),
    "stale": Need("stale", "stale allows at 8 writers", "per 1,000 revocations", False, 0.0),
}


def thresholds(t: Target) -> dict[str, float]:
    """need -> its threshold, for the needs the target states."""
    out = {"checks": t.check_p95_ms, "throughput": t.checks_per_s}
    if t.changes_per_s > 0:
        out["churn"] = t.changes_per_s
    if t.lookups_per_s > 0:
        out["lookups"] = t.lookups_per_s
    if t.freshness == "no-stale":
        out["stale"] = 0.0
    return out


@dataclass(frozen=True)
class Point:
    """One need's figure at one stage: the value and its interval, the ops it rests on."""

    stage: str
    relationships: int
    value: float
    low: float
    high: float
    ops: int = 0
    too_few: bool = False  # a round behind the percentile had fewer ops than it needs
    note: str = ""  # how the figure was read (a scenario at some workers, a mode)

    @property
    def range(self) -> Range:
        return Range(self.value, self.low, self.high)


@dataclass(frozen=True)
class Judged:
    backend: str
    need: Need
    threshold: float
    status: str  # one of STATUSES
    at: Range | None  # the figure at the target size: measured there or projected
    points: tuple[Point, ...]  # the stages' figures, smallest first
    measured_at: Point | None = None  # the stage of the target's size the status rests on
    error: float | None = None  # the method's error on the largest size measured (projected / measured - 1)
    error_of: str = ""  # "large from baseline (exponent assumed)"
    k: Range | None = None  # the exponent the projection used
    assumed: bool = False  # k is the need's k0: one size measured
    ratio: float | None = None  # r of the docstring: above 1 on the good side of the threshold
    reason: str = ""

    @property
    def meets(self) -> bool:
        return self.status in (MEETS, MEETS_P)


@dataclass
class Stage:
    """One stage of the decide run, read: its decide.json entry and its results."""

    profile: str
    relationships: int
    run: RunData
    backends: list[str] = field(default_factory=list)


# figures per stage -------------------------------------------------------------------------------------

def _consistency(rd: RunData, backend: str, scenario: str, mode: str) -> str:
    """The phases' consistency for the mode decide measured in: "" where the backend's session mode is it."""
    from authzbench.report.core.figures import rows_of

    conc = _workers(rd, backend, scenario)
    if mode and conc is not None and not rows_of(rd, backend, scenario, conc, None, consistency=mode).empty:
        return mode
    return ""


def _workers(rd: RunData, backend: str, scenario: str) -> int | None:
    ph = rd.phases
    if ph.empty:
        return None
    sub = ph[(ph["backend"] == backend) & (ph["scenario"] == scenario) & (ph["mode"] == "closed")
             & (ph["ops"] > 0)]
    return int(sub["concurrency"].min()) if not sub.empty else None


def _scenario(rd: RunData, preferred: str, op: str) -> str | None:
    measured = scenarios_measured(rd, op)
    return preferred if preferred in measured else (measured[0] if measured else None)


def check_point(st: Stage, backend: str, mode: str, metric: str = "p95_ms") -> Point | None:
    """The check percentile at the fewest workers: the decision summary's figure (figures.cell)."""
    scen = _scenario(st.run, CHECK, "check")
    conc = _workers(st.run, backend, scen) if scen else None
    if conc is None:
        return None
    cons = _consistency(st.run, backend, scen, mode)
    c = cell(st.run, backend, scen, conc, metric, "check", consistency=cons)
    if c is None:
        return None
    note = f"{scen} at {conc} worker{'s' * (conc != 1)}{f', {cons}' if cons else ''}"
    return Point(st.profile, st.relationships, c.value, c.lo, c.hi, c.n, c.too_few, note)


def rate_point(st: Stage, backend: str, preferred: str, op: str, kind: str) -> Point | None:
    """A closed-loop throughput at its best worker count (figures.best_rate)."""
    scen = _scenario(st.run, preferred, op)
    got = best_rate(st.run, backend, scen, kind) if scen else None
    if got is None:
        return None
    conc, c = got
    note = f"{scen} at {conc} worker{'s' * (conc != 1)}"
    return Point(st.profile, st.relationships, c.value, c.lo, c.hi, c.n, False, note)


def churn_point(st: Stage, backend: str) -> Point | None:
    """The sustainable churn [held, failed): the limit lies between the highest step that held and the first
    that did not (churn.sustainable); value: the held rate, a lower bound."""
    s = churn.sustainable(st.run).get(backend)
    if s is None:
        return None
    held = s.held or 0.0
    # an undecided step lies between: the limit is somewhere from the held rate up to the first failed one
    high = s.failed * (1 - 1e-9) if s.failed is not None else math.inf
    return Point(st.profile, st.relationships, held, held, max(high, held), 0, False, s.text)


def stale_point(st: Stage, backend: str, mode: str) -> Point | None:
    """Stale allows per 1,000 revocations at 8 writers in the mode decide measured in (freshness.revocations:
    Wilson's 95% interval); the count and revocations in the note."""
    df = freshness.revocations(st.run)
    mine = df[df["backend"] == backend] if not df.empty else df
    if mine.empty:
        return None
    hit = mine[mine["mode"].str.startswith(mode)] if mode else mine.iloc[0:0]
    hit = hit if not hit.empty else mine[mine["own"]]
    if hit.empty:
        return None
    r = hit.iloc[0]
    return Point(st.profile, st.relationships, float(r["per_1k"]), float(r["lo_1k"]), float(r["hi_1k"]),
                 int(r["revocations"]), False,
                 f"{r['mode']}: {r['stale_allows']:,} of {r['revocations']:,} revocations")


def point(st: Stage, backend: str, need: str, mode: str) -> Point | None:
    if need == "checks":
        return check_point(st, backend, mode)
    if need == "throughput":
        return rate_point(st, backend, CHECK, "check", "check")
    if need == "lookups":
        return rate_point(st, backend, LOOKUP, "lookup", "lookup")
    if need == "churn":
        return churn_point(st, backend)
    return stale_point(st, backend, mode)


# judging -----------------------------------------------------------------------------------------------

def measured_status(need: Need, threshold: float, p: Point) -> str:
    """The interval against the threshold: wholly on the good side meets, wholly on the bad side fails,
    across it undecided. Stale allows: 0 observed meets (its interval above 0 is the count's, stated)."""
    if need.name == "stale":
        return MEETS if p.value <= threshold else FAILS
    good_lo, good_hi = (p.low >= threshold, p.high < threshold) if need.higher_is_better else \
        (p.high <= threshold, p.low > threshold)
    return MEETS if good_lo else FAILS if good_hi else UNDECIDED


def ratio(need: Need, threshold: float, value: float) -> float | None:
    """Above 1: the figure lies on the good side of the threshold by that factor."""
    if value <= 0 or threshold <= 0:
        return None
    return value / threshold if need.higher_is_better else threshold / value


def projected_status(r: float | None, error: float | None) -> str:
    if r is None or error is None or not math.isfinite(error):
        return UNKNOWN
    e = 1 + abs(error)
    return MEETS_P if r >= e else FAILS_P if r <= 1 / e else UNKNOWN


def method_error(need: Need, pts: list[Point]) -> tuple[float | None, str]:
    """The largest size projected from the sizes below it, against its measurement."""
    usable = [p for p in pts if p.value > 0 and math.isfinite(p.value)]
    if len(usable) < 2:
        return None, "one size measured: no size to check the method on"
    last, below = usable[-1], usable[:-1]
    got = projected.grown(_ranges(below), need.k0, last.relationships)
    if got is None:
        return None, "no projection from the smaller sizes"
    how = " (exponent assumed)" if got.assumed else ""
    return got.at.value / last.value - 1, f"{last.stage} from {', '.join(p.stage for p in below)}{how}"


def _ranges(pts: list[Point]) -> list[tuple[int, Range]]:
    return [(p.relationships, Range(p.value, p.low, p.high if math.isfinite(p.high) else p.value))
            for p in pts if p.value > 0 and math.isfinite(p.value)]


def judge(backend: str, need: Need, threshold: float, pts: list[Point], size: float) -> Judged:
    pts = sorted(pts, key=lambda p: p.relationships)
    if not pts:
        return Judged(backend, need, threshold, UNKNOWN, None, (), reason="not measured at any stage")
    at_size = [p for p in pts if p.relationships >= AT_SIZE * size]
    error, error_of = method_error(need, pts)
    if at_size or need.name == "stale":
        p = at_size[0] if at_size else pts[-1]
        status = measured_status(need, threshold, p)
        return Judged(backend, need, threshold, status, p.range, tuple(pts), p, error, error_of,
                      ratio=ratio(need, threshold, p.value),
                      reason=_measured_reason(need, threshold, p, status))
    got = projected.grown(_ranges(pts), need.k0, size)
    if got is None:  # every figure 0: a churn that held no step, a throughput of nothing
        p = pts[-1]
        return Judged(backend, need, threshold, measured_status(need, threshold, p), p.range, tuple(pts), p,
                      reason=f"{need.title} {p.value:g} at {p.stage}: nothing to project")
    r = ratio(need, threshold, got.at.value)
    status = projected_status(r, error)
    return Judged(backend, need, threshold, status, got.at, tuple(pts), None, error, error_of, got.k,
                  got.assumed, r, _projected_reason(r, error))


def _measured_reason(need: Need, threshold: float, p: Point, status: str) -> str:
    side = ">=" if need.higher_is_better else "<="
    return f"{need.title} at {p.stage} against {side} {threshold:g} {need.unit}: {status}"


def _projected_reason(r: float | None, error: float | None) -> str:
    """The margin and which side of the method's error it lies (the error itself is in the claim's label)."""
    if error is None:
        return "no error to judge the projection by (one size measured)"
    if r is None:
        return "no margin: a figure of 0"
    beyond = r >= 1 + abs(error) or r <= 1 / (1 + abs(error))
    return f"margin x{r:.3g}, {'beyond' if beyond else 'within'} the method's error"


# the run ----------------------------------------------------------------------------------------------

def results_dir(entry: dict, decide_json: Path) -> Path:
    """A stage's results directory: beside the decide run's own directory first (results/<run-id>, or
    reports/data/<run-id> for a committed example, whatever path decide.json recorded), else as recorded."""
    given = Path(entry["results_dir"])
    beside = decide_json.parent.parent
    run_id = entry.get("run_id", given.name)
    for p in (beside / given.name, beside / run_id, given, decide_json.parent / given):
        if p.is_dir():
            return p
    return given


def stages(decide: dict, decide_json: Path) -> list[Stage]:
    out = []
    for e in decide["stages"]:
        rd = load_run(results_dir(e, decide_json))
        out.append(Stage(e["profile"], int(e["relationships"]), rd, list(e["backends"])))
    return sorted(out, key=lambda s: s.relationships)


def survivors(decide: dict) -> list[str]:
    """The backends no stage pruned, in the order the stages first measured them."""
    gone = {p["backend"] for p in decide.get("pruned", [])}
    seen = dict.fromkeys(b for s in decide["stages"] for b in s["backends"])
    return [b for b in seen if b not in gone]


def target_of(decide: dict) -> Target:
    t = dict(decide["target"])
    return Target(**{k: v for k, v in t.items() if k in Target.__dataclass_fields__})


def mode_of(decide: dict, backend: str) -> str:
    return ((decide.get("modes") or {}).get(backend) or {}).get("mode", "")


def judge_all(decide: dict, runs: list[Stage]) -> dict[str, list[Judged]]:
    """backend -> its needs judged at the target size, for every survivor."""
    target = target_of(decide)
    out: dict[str, list[Judged]] = {}
    for b in survivors(decide):
        mode = mode_of(decide, b)
        mine = [s for s in runs if b in s.backends]
        out[b] = [judge(b, NEEDS[n], thr, [p for s in mine if (p := point(s, b, n, mode)) is not None],
                        target.relationships)
                  for n, thr in thresholds(target).items()]
    return out

