"""After a phase that wrote: the write ops left midway cleaned up, then a sample of checks and the anchor
lookups compared with the pristine oracle, so a dataset not left as loaded is counted, never hidden."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from authzbench.backends.base import Backend
from authzbench.core.console import say
from authzbench.core.records import Interval, Restored, as_dict
from authzbench.core.restore_rule import HEAVY_CHECKS, HEAVY_LOOKUP_MAX_S
from authzbench.results.store import RunStore
from authzbench.run.servers import Session
from authzbench.schema.dataset import Dataset
from authzbench.systems import declared
from authzbench.workloads.catalog import READ_SCENARIOS, scenario

HEAVY_LOOKUP = "lookup_resources_manage_super"  # the heaviest user's: left out with heavy=""


def heavy_restore(op_s: float | None) -> str:
    """How the final restore check covers the heaviest user: "lookup", or "checks" when the run measured
    that lookup slower than HEAVY_LOOKUP_MAX_S an op (op_s: its seconds an op, None when not measured)."""
    return "checks" if op_s is not None and op_s > HEAVY_LOOKUP_MAX_S else "lookup"


def as_checks(lookup: tuple, n_resources: int, n: int = HEAVY_CHECKS) -> list[tuple[str, tuple, bool]]:
    """A lookup input (op, (user, perm), expected resources) asked as checks: up to n resources it returns
    and up to n it does not, drawn with a fixed seed (the same in every run)."""
    _, (user, perm), expected = lookup
    rng = np.random.default_rng(user)
    held = np.asarray(sorted(expected), dtype=np.int64)
    others = np.setdiff1d(np.arange(n_resources, dtype=np.int64), held, assume_unique=True)
    yes = rng.choice(held, min(n, len(held)), replace=False) if len(held) else held
    no = rng.choice(others, min(n, len(others)), replace=False) if len(others) else others
    return [("check", (user, perm, int(r)), True) for r in yes] + [("check", (user, perm, int(r)), False)
                                                                    for r in no]


def repair_scratch(b: Backend, ops: list, rec: dict, clean_all: bool = False) -> None:
    """Clean up the ops left midway (or all of them: deleting an edge an op never wrote writes nothing, it
    costs one recompute of the edge's reach). A stopped worker's group lock is waited out (EXPIRE_S)."""
    from authzbench.backends.locks import EXPIRE_S, WAIT_S, LockBusy
    from authzbench.measure.visibility import clean_up, left_behind

    left = left_behind(b, ops)
    todo = ops if clean_all else left
    for op in todo:
        for attempt in range(1 + math.ceil(EXPIRE_S / WAIT_S)):
            try:
                clean_up(b, op)
                break
            except LockBusy:
                if attempt == math.ceil(EXPIRE_S / WAIT_S):
                    raise
    rec.update(scratch_checked=len(ops), scratch_left=len(left), scratch_cleaned=len(todo),
               scratch_still_left=len(left_behind(b, todo)))


# Restore checks ran one at a time: 211 s of make bench's 36 min, 138 s of it Permify's fully consistent
# checks, which wait on its datastore. Four clients, each with its own connection as a worker has.
RESTORE_CLIENTS = 4


def _answers(sess: Session, ds: Dataset, inputs: list) -> list[tuple[str, tuple, bool]]:
    """(op, args, answer equals the expected) for every input, from RESTORE_CLIENTS clients at once."""
    def run(part: list) -> list[tuple[str, tuple, bool]]:
        with sess.backend(dataset_path=str(ds.path), consistency="fully_consistent") as b:
            return [(op, args, sorted(b.lookup_resources(*args)) == sorted(expected) if op == "lookup"
                     else bool(b.check(*args)) == expected) for op, args, expected in part]

    parts = [inputs[i::RESTORE_CLIENTS] for i in range(RESTORE_CLIENTS)]
    with ThreadPoolExecutor(RESTORE_CLIENTS) as pool:
        return [answer for part in pool.map(run, [p for p in parts if p]) for answer in part]


@dataclass(frozen=True)
class RestoreOptions:
    """How much a restore check covers (verify_restored): the sample's size, the write ops to repair first,
    whether every op is cleaned up, how the heaviest user is asked, whether the sample runs at all."""

    n_checks: int = 200
    write_ops: list | None = None
    clean_all: bool = False
    heavy: str = "lookup"
    sample: bool = True


def verify_restored(sess: Session, ds: Dataset, oracle, store: RunStore, phase_id: str,
                    opts: RestoreOptions = RestoreOptions()) -> dict:
    """After a phase that wrote: every write was undone, so a sample of checks and the anchor lookups must
    equal the pristine oracle again (recorded; a difference counts as mismatches of the phase). The
    write scenarios' ops are cleaned up first: those whose probe shows them left midway, or every op when
    workers were stopped mid-op (clean_all: a half-done write can leave other users' rows behind).
    heavy="" leaves out the heaviest user's lookup (the caller runs it after the backend's last writing
    phase: a dataset left changed stays changed): it took Permify 30 s, 9 times a visit; heavy="checks" asks
    that user by checks instead (heavy_restore). sample=False checks
    only the write ops' probes and controls (repair_scratch: the users the phase's writes touched)."""
    n_checks, write_ops, clean_all, heavy, sample = (
        opts.n_checks, opts.write_ops, opts.clean_all, opts.heavy, opts.sample)
    rebac = ds.model == "rebac"
    inputs = scenario("mixed" if rebac else "social_mixed").sampler(ds, oracle, n_checks) if sample else []
    own = declared(sess.name)
    # a system without a reverse lookup: its anchors as checks
    by_checks = bool(own and own.no_lookup)
    if rebac and sample:  # the anchor lookups: the heaviest manage user's and a median viewer's
        for n in READ_SCENARIOS:
            if scenario(n).op == "lookup" and n != HEAVY_LOOKUP:
                anchor = scenario(n).sampler(ds, oracle, 1)[0]
                inputs += as_checks(anchor, ds.entities["resource"]) if by_checks else [anchor]
        heavy = "checks" if heavy and by_checks else heavy
        if heavy:
            lookup = scenario(HEAVY_LOOKUP).sampler(ds, oracle, 1)[0]
            inputs += [lookup] if heavy == "lookup" else as_checks(lookup, ds.entities["resource"])
    rec: dict = {"backend": sess.name, "phase": phase_id, "checked": 0, "mismatches": 0, "examples": [],
                 "heavy": heavy if rebac and sample else ""}
    try:
        # fully consistent: a quantized snapshot (SpiceDB) could answer from before the undo
        if write_ops:
            with sess.backend(dataset_path=str(ds.path), consistency="fully_consistent") as b:
                repair_scratch(b, write_ops, rec, clean_all)
        for op, args, ok in _answers(sess, ds, inputs):
            rec["checked"] += 1
            if not ok:
                rec["mismatches"] += 1
                if len(rec["examples"]) < 5:
                    rec["examples"].append({"op": op, "args": list(args)})
    except Exception as e:  # noqa: BLE001 - a server that died is recorded, not raised
        rec["error"] = f"{type(e).__name__}: {str(e)[:200]}"
    rec = as_dict(store.append(Restored(**rec)))
    if rec.get("scratch_left"):
        say(f"[yellow]{sess.name}: after {phase_id}, {rec['scratch_left']} op(s) stopped midway had left "
            f"their grant in place; cleaned up ({rec['scratch_still_left']} still left)[/yellow]")
    if rec["mismatches"] or rec.get("error"):
        say(f"[red]{sess.name}: after {phase_id} the dataset is not as loaded: {rec}[/red]")
    return rec


def touched_ops(spec, inputs: list, intervals: list[Interval], clean: bool) -> list:
    """The structural ops a write phase or churn step may have left changed, for the restore check's repair (2
    fully consistent checks an op: ~28 ms each on Permify, 11 s for a phase's 200 ops). A write phase's worker
    w starts every n-th input from w, in order, and counts them ("started"); a churn step's writers reuse
    theirs and clean up what they hold when they end. All of them when a worker was stopped (its counts may be
    lost)."""
    structural = [inp for inp in inputs if inp[0] == "structural"]
    if not clean:
        return [o for inp in structural for o in inp[1:] if o]
    if spec.churn_writers:
        return []
    started: dict[int, int] = {}
    for iv in intervals:
        if iv.kind == "write":
            started[iv.worker] = started.get(iv.worker, 0) + (iv.extra or {}).get("started", 0)
    n = spec.concurrency
    picked = {(w + n * i + spec.input_offset) % len(inputs) for w, s in started.items() for i in range(s)}
    warm = [inputs[k][2]
            for k in range(min(spec.warmup, len(inputs)))
            if inputs[k][0] == "structural" and inputs[k][2]]
    return [inputs[k][1] for k in sorted(picked)] + warm
