"""One phase run once on a loaded backend, the step below the drivers: its monitor, its workers
(measure/runner.py here, or the load hosts' Dask pool), its records to the store as they come; then what else
ran meanwhile (a re-run when other processes disturbed it) and, after a phase that wrote, the restore check
(restore.py). orchestrate.py calls `attempt` for every phase of a visit; nothing here loops over phases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from authzbench.backends.registry import backend_class
from authzbench.config import Schedule
from authzbench.core import records as rec
from authzbench.core.console import say
from authzbench.core.stopping import check as check_stop
from authzbench.core.stopping import polled, request_stop
from authzbench.measure.pools import KeptWorkers
from authzbench.measure.runner import BackendFactory, PhaseSpec, run_phase
from authzbench.results.store import ResultsUnwritable, RunStore
from authzbench.run.progress import timed_step
from authzbench.run.restore import RestoreOptions, touched_ops, verify_restored
from authzbench.run.servers import Session, monitor_for
from authzbench.schema.dataset import Dataset
from authzbench.workloads.catalog import scenario


@dataclass
class PhaseSeat:
    """What every phase of a visit runs against: the backend's session, the run's store, dataset, oracle and
    schedule, the load hosts' client (None: this host), the visit's kept workers, the other servers' PIDs."""

    sess: Session
    store: RunStore
    ds: Dataset
    oracle: Any
    sched: Schedule
    client: Any
    kept: KeptWorkers | None
    others: list[int]


def attempt(seat: PhaseSeat, spec: PhaseSpec, inputs: list, heavy_restore: str = "lookup",
            restore_check: bool = True, tap: list[rec.Interval] | None = None) -> tuple[bool, Any]:
    """Run one phase once; (True when foreign CPU disturbed it and a re-run is still allowed, its result).
    restore_check=False: a mixed phase that ended cleanly is not restore-checked, a write scenario's only on
    the users its ops touched (phase_plan.RestoreChecks)."""
    sess, store, ds, sched = seat.sess, seat.store, seat.ds, seat.sched
    name, sc = sess.name, scenario(spec.scenario)
    cls = backend_class(name)
    say(f"{name}: {spec.phase_id}")
    if tap is None and sc.op == "write":
        tap = []  # which ops the workers started: the restore check repairs those (restore.touched_ops)
    sink = _phase_sink(store, tap)
    mon = monitor_for(sess, lambda s, pid=spec.phase_id, sink=sink: sink(
        rec.Monitor(backend=name, phase=pid, **s)), seat.others).gated()
    with mon, polled():  # samples only while ops are measured; a signal ends the phase, recorded
        mode = {"consistency": spec.consistency} if spec.consistency else {}
        # the scenario's per-op bound reaches the driver (statement/request/gRPC timeouts)
        factory = sess.factory(dataset_path=str(ds.path), timeout_s=spec.timeout_s, **mode)
        res = _run_phase(spec, factory, inputs, sink, cls.concurrency, mon.window, seat.client, seat.kept)
    rerun = _judge_disturbance(sched, store, spec, mon.disturbance(), res.status)
    clean = res.status == "complete" and not res.stopped_workers
    if sc.op in ("write", "churn") or (sc.op == "mixed" and (restore_check or not clean)):
        check_stop()  # a stopped run ends now: the restore check can take minutes on a slow backend
        with timed_step(store, name, f"restore check after {spec.phase_id}"):
            verify_restored(sess, ds, seat.oracle, store, spec.phase_id, RestoreOptions(
                write_ops=touched_ops(spec, inputs, tap or [], clean) if sc.op != "mixed" else None,
                clean_all=res.stopped_workers > 0, heavy=heavy_restore, sample=restore_check or not clean))
    check_stop()
    if res.status == "failed":
        say(f"[red]{name}: {spec.phase_id} failed: {res.reason}[/red]")
    elif res.status == "incomplete":
        say(f"[yellow]{name}: {spec.phase_id} incomplete: {res.reason}[/yellow]")
    return rerun, res


def _judge_disturbance(sched: Schedule, store: RunStore, spec: PhaseSpec, d, status: str) -> bool:
    """Record what else ran during the phase; True when it should run again (disturbed, re-runs left)."""
    if d is None:
        return False
    disturbed = d.foreign_cpu > sched.disturbed_cpu
    rerun = disturbed and spec.attempt < sched.max_reruns and status != "failed"
    store.append(
        rec.Disturbance(
            phase=spec.phase_id, backend=spec.backend, attempt=spec.attempt, threshold=sched.disturbed_cpu,
            disturbed=disturbed, rerun=rerun, **d.as_record()))
    if disturbed:
        say(f"[yellow]{spec.backend}: {spec.phase_id} disturbed: other processes used {d.foreign_cpu:.0f}% "
            "of a "
            f"core (threshold {sched.disturbed_cpu:g}%){'; running it again' if rerun else ''}[/yellow]")
    return rerun


def _run_phase(spec: PhaseSpec, factory: BackendFactory, inputs: list, sink, conc_model: str,
               on_window, client, kept: KeptWorkers | None = None):
    if client is None:
        return run_phase(spec, factory, inputs, sink, conc_model, on_window=on_window, kept=kept)
    from authzbench.measure.distributed import run_phase_distributed

    return run_phase_distributed(spec, factory, inputs, sink, client, on_window=on_window)


def _phase_sink(store: RunStore, tap: list[rec.Interval] | None = None):
    """store.append for a phase's records (also called from the monitor's thread): when the results dir
    stops taking writes, the phase is stopped like on a signal (workers end, nothing hangs) and the run
    then ends with that one error. With `tap`, the phase's intervals are also collected there (a churn step's
    verdict)."""

    def append(record: rec.Record) -> None:
        if tap is not None and isinstance(record, rec.Interval):
            tap.append(record)
        try:
            store.append(record)
        except ResultsUnwritable as e:
            request_stop("an unwritable results directory", e)

    return append
