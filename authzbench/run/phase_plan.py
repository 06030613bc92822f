"""Which phases a backend runs, in which order: every scenario x worker count split into rounds, each round in
a rotated order, the rounds spread over the backend's visits (forward, then reverse order); open-loop rate
steps; the extra read consistency modes of the write scenarios."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from authzbench.config import Churn, MixedLoad, Schedule
from authzbench.schema.dataset import Dataset
from authzbench.workloads.catalog import SCRATCH_WRITES, Scenario, input_count, scenario
from authzbench.workloads.spec import BUDGET_STRETCH, PhaseSpec
from authzbench.workloads.writes import VISIBILITY_BOUND_S, mixed_targets

# A churn step's readers: 100 checks/s over 8 workers is one check every 80 ms each, so a check under 80 ms
# never waits on its own worker's previous one (the SLO is 25 ms): what queues is the server. 8 is also the
# closed-loop sweep's middle worker count, whose check figures the step's are set beside.
CHURN_READERS = 8
# revoke_then_check's concurrent writers: the shape in which tools/newenemy_repro.py sees stale allows.
REVOKE_SCENARIO, REVOKE_WRITERS = "revoke_then_check", 8
# The check each engine's consistency modes are compared on (its 1-worker latency per mode).
MODE_CHECK = "check_view_via_group_member"


@dataclass(frozen=True)
class BackendTraits:
    """What the plan needs of the backend it is for: its name, how its workers run (`thread`: an in-process
    engine, never past 8 workers), its read consistency modes and the one the run chose (--consistency)."""

    name: str
    concurrency: str = "process"
    consistency_modes: tuple[str, ...] = ()
    consistency: str = ""

    @classmethod
    def of(cls, name: str, options: dict) -> BackendTraits:
        """From the registry's adapter class and the run's backend options."""
        from authzbench.backends.registry import backend_class

        c = backend_class(name)
        return cls(name, c.concurrency, tuple(c.consistency_modes), options.get("consistency") or "")


def _consistency_specs(modes: tuple[str, ...], iters: int, common: dict) -> list[PhaseSpec]:
    """revoke_then_check once more at REVOKE_WRITERS in every read consistency mode of the backend (the run's
    own too, named), beside its 1-writer phase: stale allows show with concurrent writers
    (tools/newenemy_repro.py), not with one, and each mode's write latency and visibility lag come with them.
    The other write scenarios no longer run once per other mode: those 10 phases at 20 ops and their restore
    checks took ~28 s of make bench (20261128-160246) for figures the revocations at 8 writers now give."""
    if common["scenario"] != REVOKE_SCENARIO:
        return []
    return [PhaseSpec(mode="closed", concurrency=REVOKE_WRITERS, iterations=iters, consistency=m, **common)
            for m in modes or ("",)]


def _mode_check_specs(sc: Scenario, modes: tuple[str, ...], chosen: str, common: dict,
                      share: int) -> list[PhaseSpec]:
    """The via-group check at 1 worker in each other consistency mode of the engine: latency against the
    staleness each mode allows, on the same machine in the same hour. Bounded like a whole read phase (one
    round's budget is the scenario's budget split over the rounds: here the budget is whole, in round 0).

    Each mode starts at its own point of round 0's slice of inputs (`share` of them), spread evenly after the
    session mode's phases, which start at 0: started at 0 too, they re-asked inputs those had just checked and
    answered them from cache (20261129-201802: SpiceDB at_least_as_fresh's first second at p50 0.739 ms, the
    rest 4.25; Permify fully_consistent 1.01 ms, then 10.7), so a safe mode measured faster than the
    session's. The session phases there checked at most 1,259 inputs of a 4,000 share; SpiceDB's 2 other modes
    start at 1,333 and 2,666 and each checked at most 1,404."""
    chosen = chosen or (modes[0] if modes else "")
    common = {**common, "budget_s": sc.budget_s, "min_ops": sc.min_ops}
    others = [m for m in modes if m != chosen]
    return [PhaseSpec(mode="closed", concurrency=1, iterations=sc.iterations, consistency=m,
                      input_offset=(j + 1) * share // (len(others) + 1), **common)
            for j, m in enumerate(others)]


def _mode_specs(sched: Schedule, sc: Scenario, backend: BackendTraits, iters: int, common: dict,
                rnd: int, share: int) -> list[tuple[PhaseSpec, str]]:
    """The phases a scenario adds for the backend's read consistency modes."""
    modes, chosen = backend.consistency_modes, backend.consistency
    if sc.op == "write":
        specs = _consistency_specs(modes, iters, common)
    elif sc.name == MODE_CHECK and rnd % sched.rounds == 0:
        specs = _mode_check_specs(sc, modes, chosen, common, share)
    else:
        specs = []
    return [(spec, sc.name) for spec in specs]


def _churn_specs(churn: Churn, common: dict) -> list[PhaseSpec]:
    """One open-loop step per churn rate, ascending: the checks' schedule is the stage, the changes' rate
    churn_rate over the churn_writers last workers (measure/inflight.py churn_writer)."""
    common = {**common, "budget_s": None, "min_ops": 0,
              "visibility_bound_s": max(VISIBILITY_BOUND_S, churn.freshness_s)}
    return [PhaseSpec(
                mode="open", concurrency=CHURN_READERS + churn.writers, start_rate=churn.read_rate,
                stages=[(churn.read_rate, churn.step_s)], churn_rate=r, churn_writers=churn.writers, **common)
            for r in sorted(churn.rates)]


def _split(n: int, rounds: int) -> int:
    return max(1, math.ceil(n / rounds))


def _round_specs(sched: Schedule, mixed: MixedLoad, backend: BackendTraits, ds: Dataset,
                 rnd: int, churn: Churn) -> list[tuple[PhaseSpec, str]]:
    """One round: every scenario x concurrency once, each with 1/rounds of the phase's ops, warm-up, budget
    and the ops its budget waits for (a figure merges its rounds back to the whole phase's ops)."""
    specs = []
    for sname in sched.scenarios or []:
        sc = scenario(sname)
        if sc.op == "ingest":
            continue
        # A write phase runs whole in the first round (first visit): its ops are few and slow where a write is
        # costly (one FerretDB hierarchy op took 33 s at baseline), and split over 3 rounds each round waited
        # for at least one such op, tripling the phase for no more ops.
        parts = 1 if sc.op == "write" else sched.rounds
        if sc.op == "write" and rnd % sched.rounds:
            continue
        iters = _split(max(1, round(sc.iterations * sched.iterations_scale)), parts)
        # each round starts at its own share of the sampled inputs (its ops may cycle through all of them)
        share = min(iters, _split(input_count(sc, sched.iterations_scale), parts))
        warm = (
            _split(max(0, round(sc.warmup * min(1.0, sched.iterations_scale * 4))), parts) if sc.warmup else 0
        )
        budget = sc.budget_s * sched.iterations_scale / parts if sc.budget_s else None
        rel, obj_type = SCRATCH_WRITES[ds.model]
        common = dict(backend=backend.name, scenario=sname, warmup=warm, timeout_s=sc.timeout_s,
                      max_seconds=sc.max_seconds, repeat=rnd, n_resources=ds.entities[obj_type],
                      budget_s=budget, min_ops=_split(sc.min_ops, parts) if sc.min_ops else 0,
                      scratch_user=ds.entities["user"], scratch_relation=rel)
        if sc.op == "churn":  # a sweep is one run of steps: whole, in the first round
            specs += (
                [(spec, sname) for spec in _churn_specs(churn, common)] if rnd % sched.rounds == 0 else [])
            continue
        if sc.op == "mixed":
            common["write_share"] = mixed.write_share
            if ds.model == "rebac":
                common.update(write_kind=mixed.write_kind, write_targets=mixed_targets(ds))
            if open_loop := _open_loop_specs(sched, mixed, common, sname):
                # a rate step or a ramp is one schedule: not split; it runs in the first round only
                specs += open_loop if rnd % sched.rounds == 0 else []
                continue
        if rnd % sched.rounds >= sched.visits and sc.op != "write":
            # Round rnd - visits of this key ran earlier in this visit (visit_of), on the visit's kept worker
            # processes and connections (pools.KeptWorkers): only a key's first round of a visit warms up. The
            # warm-ups were most of a read phase's ~0.9 s outside its window (20261128-013743: 456 s over 500
            # read phases); a warm-up op of Permify's heaviest lookup is one 31 s op.
            common["warmup"] = 0
        for c in _worker_counts(sched, sc.op, sc.latency_only and not sched.full_curve):
            if backend.concurrency == "thread" and c > 8:
                continue  # in-process engines: more threads only measure the GIL
            if sc.max_workers and c > sc.max_workers:
                continue  # catalog.HEAVY_LOOKUP_WORKERS
            specs.append((PhaseSpec(mode="closed", concurrency=c, iterations=iters,
                                    input_offset=(rnd % sched.rounds) * share, **common), sname))
        specs += _mode_specs(sched, sc, backend, iters, common, rnd, share)
    return specs


def _worker_counts(sched: Schedule, op: str, latency_only: bool = False) -> list[int]:
    """The round trip runs at the fewest workers only: the report divides a check's p50 by the 1-worker round
    trip and reads it nowhere else, and at 8 and 32 workers it was 48 of make bench's 567 phases. So do the
    check paths the catalog marks latency_only (catalog.LATENCY_ONLY)."""
    if op == "write":
        return sched.write_concurrency
    return [min(sched.concurrency)] if op == "roundtrip" or latency_only else sched.concurrency


def _open_loop_specs(
    sched: Schedule, mixed: MixedLoad, common: dict, sname: str) -> list[tuple[PhaseSpec, str]]:
    common = {**common, "warmup": common["warmup"] * sched.rounds}
    workers = max(sched.concurrency)
    if mixed.rates:  # a step per rate: the report finds the highest rate that passes
        return [(PhaseSpec(mode="open", concurrency=workers, stages=[(r, mixed.duration_s)],
                           start_rate=r, **common), sname) for r in mixed.rates]
    if mixed.rate or mixed.stages:
        stages = mixed.stages or [(mixed.rate, mixed.duration_s)]
        start_rate = mixed.rate if not mixed.stages else (mixed.rate or 0.0)
        return [(PhaseSpec(mode="open", concurrency=workers, stages=stages, start_rate=start_rate,
                           **common), sname)]
    return []


def phase_specs(sched: Schedule, mixed: MixedLoad, backend: BackendTraits,
                ds: Dataset, churn: Churn | None = None) -> list[tuple[PhaseSpec, str]]:
    """Every round of every repeat, each round in a rotated order: round k starts k/rounds of the way into
    the list, so a slow period of the machine during a backend's span lands on every scenario alike and
    the spread between rounds measures it (Google Benchmark's random interleaving, asv's rounds)."""
    specs = []
    for rnd in range(sched.rounds * sched.repeat):
        one = _round_specs(sched, mixed, backend, ds, rnd, churn or Churn())
        k = (rnd % sched.rounds) * len(one) // sched.rounds
        specs += one[k:] + one[:k]
    return specs


def visit_order(names: list[str], visits: int) -> list[tuple[int, str]]:
    """(visit, backend) in the order bench runs them: forward, then reverse, then forward..."""
    return [(v, n) for v in range(visits) for n in (names if v % 2 == 0 else names[::-1])]


def visit_of(sched: Schedule, rnd: int) -> int:
    """Rounds alternate between visits: with 3 rounds and 2 visits, rounds 0 and 2 run in the first visit
    (backends in order) and round 1 in the second (backends in reverse order)."""
    return rnd % sched.visits


@dataclass(frozen=True)
class RestoreChecks:
    """Which of a backend's phases get the sampled restore check, and which also covers the heaviest user.

    A phase that wrote undoes its own writes, so the sampled restore check (200 checks and the anchor
    lookups, fully consistent) only proves they were undone: it runs after the visit's last writing phase,
    not after each of them (9 a backend cost make bench 195 s, Permify 139 s of them), and after any mixed
    phase that did not end cleanly (the driver sees that). After every write scenario its ops' own probes and
    controls, the users its writes touched, are checked and whatever a stopped op left is repaired
    (restore.repair_scratch): the 200-check sample after each of them was 130 s of 20261128-013743's 222 s of
    restore checks. The heaviest user's lookup is checked once, after the backend's last writing phase of
    the run: a dataset left changed stays changed. Once a visit, it took Permify ~50 s (fully consistent)
    twice."""

    visit_last: PhaseSpec | None
    run_last: PhaseSpec | None

    @classmethod
    def of(cls, sched: Schedule, plan: list[tuple[PhaseSpec, str]], visit: int) -> RestoreChecks:
        """From the backend's whole plan (phase_specs), for its visit `visit`."""
        writes = [(visit_of(sched, spec.repeat), i, spec) for i, (spec, sname) in enumerate(plan)
                  if scenario(sname).op in ("write", "mixed", "churn")]
        run_last = max(writes, key=lambda w: w[:2])[2] if writes else None
        visit_last = max((w for w in writes if w[0] == visit), key=lambda w: w[1], default=(0, 0, None))[2]
        return cls(visit_last, run_last)

    def sampled(self, spec: PhaseSpec) -> bool:
        """True for the visit's last writing phase and the backend's last writing phase of the run."""
        return spec is self.visit_last or spec is self.run_last

    def heavy_user(self, spec: PhaseSpec) -> bool:
        """True only for the backend's last writing phase of the run."""
        return spec is self.run_last


# A 1-writer write phase that ran this long past its budget had writes that outlast it. The ops in flight at
# the budget drain first, each change up to a 5 s window to show: OpenFGA's ran up to 8.9 s past a 3 s budget
# (20261129-103220). 21 s keeps the line where it was at a 6 s budget (4x, 24 s): FerretDB's 1-writer
# revocation took 21 s on a 2.8 GHz host, and its 8 writers then timed 208 ops in 34 s (20261129-165944); on a
# slower host it took 34-38 s (20261129-071003, 20261129-103220), and 8 writers queue behind such writes.
SLOW_WRITES_PAST_BUDGET_S = 21.0


@dataclass
class Pace:
    """Seconds per op of each closed-loop read scenario at each worker count, from the phases run so far: a
    higher worker count whose ops would all outlast their timeout is not run. Permify's heaviest-user lookup
    took 17-21 s an op at 1 worker and every op at 8 workers timed out (75 s each, 60 s timeout) in each of
    three rounds: 5 of make bench's 40 minutes spent recording timeouts (20261126-033854)."""

    cores: int  # the server's cores: up to this many workers can run side by side without queueing
    seen: dict[tuple[str, str], dict[int, float]] = field(default_factory=dict)
    # write phases far past their budget
    slow_writes: dict[tuple[str, str], float] = field(default_factory=dict)

    # writes and mixed phases are never skipped: an op past its bound is honest work
    READS = ("check", "lookup")

    def note(self, spec: PhaseSpec, op: str, ops: int, wall_s: float) -> None:
        """A finished phase: its mean op time (Little's law on the closed loop: window x workers / ops)."""
        if op == "write" and spec.concurrency == 1 and spec.budget_s and \
                wall_s > spec.budget_s + SLOW_WRITES_PAST_BUDGET_S:
            self.slow_writes[(spec.backend, spec.scenario)] = wall_s
        if (op not in self.READS
            or spec.mode != "closed"
            or spec.write_share
            or spec.consistency
            or wall_s <= 0):
            return
        if ops:
            per_op = wall_s * spec.concurrency / ops
        elif wall_s >= spec.timeout_s:
            per_op = spec.timeout_s  # every op ran past its timeout: at least that long
        else:
            return  # no op and no time: nothing learnt (an error, a stop)
        self.seen.setdefault((spec.backend, spec.scenario), {})[spec.concurrency] = per_op

    def op_s(self, backend: str, scenario: str) -> float | None:
        """Seconds an op of a read scenario at the fewest workers it ran at, None when it has not run."""
        seen = self.seen.get((backend, scenario))
        return seen[min(seen)] if seen else None

    def too_slow(self, spec: PhaseSpec, op: str) -> str:
        """Why every op of this phase would outlast its timeout (or leave the round under its op floor), or ''
        to run it. Predicted from a lower worker count's op time, assuming the extra workers share the
        server's cores: c workers on `cores` cores make each op at least c / max(lower, cores) times slower (1
        -> 8 workers on 2 cores: 4x)."""
        if op == "write":
            return self._queued_writers(spec)
        if op not in self.READS:
            return ""
        if why := self._bounded_by_ops(spec):
            return why
        for lower, per_op in sorted(self.seen.get((spec.backend, spec.scenario), {}).items()):
            if lower >= spec.concurrency:
                break
            predicted = per_op * spec.concurrency / max(lower, self.cores)
            how = (
                f"{per_op:.1f} s an op at {lower} worker{'s' if lower > 1 else ''}, x {spec.concurrency} / "
                f"{max(lower, self.cores)} on {self.cores} cores")
            if predicted > spec.timeout_s:
                return f"predicted {predicted:.0f} s an op, over its {spec.timeout_s:g} s timeout: {how}"
            if why := self._under_op_floor(spec, predicted, how):
                return why
        return ""

    @staticmethod
    def _under_op_floor(spec: PhaseSpec, predicted: float, how: str) -> str:
        """A round whose every op is predicted past the budget's longest stretch ends with one op a worker,
        and fewer workers than the round's op floor make a figure under that floor, bought at the cost of a
        whole op time. Permify's heaviest lookup took 13.3 s an op at 1 worker and its 8-worker round 72 s for
        8 ops (20261129-180827); SpiceDB's 0.5 s an op predicts 2 s, inside the 8 s stretch, and runs."""
        if not spec.budget_s or spec.budget_s >= spec.max_seconds or spec.concurrency >= spec.min_ops:
            return ""
        stretch = spec.budget_s * BUDGET_STRETCH
        if predicted <= stretch:
            return ""
        return (f"under its op floor: predicted {predicted:.0f} s an op, past the round's {stretch:.1f} s "
                "budget, "
                f"so {spec.concurrency} ops (one a worker) against a floor of {spec.min_ops}: {how}")

    def _queued_writers(self, spec: PhaseSpec) -> str:
        """A write scenario at several writers whose 1-writer phase ran far past its budget: its ops outlast
        the budget alone, and concurrent writers queue behind the same writes (FerretDB's group lock): 8
        writers arming revoke ops of 10-23 s each would take minutes for a figure of a few ops."""
        wall = self.slow_writes.get((spec.backend, spec.scenario))
        if spec.concurrency == 1 or wall is None:
            return ""
        return (
            f"at 1 writer the phase took {wall:.0f} s for its {spec.budget_s:g} s budget (its ops outlast "
            f"it); {spec.concurrency} writers would queue behind the same slow writes")

    def _bounded_by_ops(self, spec: PhaseSpec) -> str:
        """A later round of a phase whose every op outlasted the budget's longest stretch in an earlier round:
        each round measures one op a worker, so more rounds repeat what is already clear. Permify's heaviest
        lookup (22-24 s an op, every other backend under 0.6 s) took 3 rounds x ~72 s for 3 ops
        (20261127-154106)."""
        per_op = self.seen.get((spec.backend, spec.scenario), {}).get(spec.concurrency)
        if per_op is None or not spec.budget_s or spec.budget_s >= spec.max_seconds:
            return ""
        stretch = spec.budget_s * BUDGET_STRETCH
        if per_op <= stretch:
            return ""
        return (f"bounded by op count: an op took {per_op:.1f} s at {spec.concurrency} "
                f"worker{'s' if spec.concurrency > 1 else ''} in an earlier round, past the round's "
                f"{stretch:.1f} s "
                "budget; the figure rests on that round's ops")
