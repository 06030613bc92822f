"""prepare and bench, the drivers of the main job: backend by backend, each phase run (and re-run when other
processes disturbed it), its records written to the results as they are produced.

`bench` alone prepares what is missing (servers.py, loading.py) and stops what it started itself; the
dataset comes from dataset.py, the phases from phase_plan.py, and each phase is run once by phase.py (its
workers, its disturbance, its restore check). A backend that fails (cannot start, dies mid-run) is recorded
and the run moves on to the next.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

from authzbench.backends.registry import backend_class
from authzbench.config import BenchConfig
from authzbench.core import records as rec
from authzbench.core import speed
from authzbench.core.console import say
from authzbench.core.errors import UserError
from authzbench.core.stopping import Interrupted, clear_internal_stop, signal_name
from authzbench.measure.pools import KeptWorkers, preload_worker_modules
from authzbench.provision.builds import build_all, pending_builds
from authzbench.provision.manager import external_url_var
from authzbench.results.store import ResultsUnwritable, RunStore
from authzbench.run import phase
from authzbench.run.dataset import dataset_and_oracle, dataset_of
from authzbench.run.loading import load_backend
from authzbench.run.phase_plan import BackendTraits, Pace, RestoreChecks, phase_specs, visit_of, visit_order
from authzbench.run.progress import RunEta, RunProgress, planned_seconds, run_progress, timed_step
from authzbench.run.restore import HEAVY_LOOKUP, heavy_restore
from authzbench.run.servers import Session, pin_cores, running_pids
from authzbench.schema.dataset import Dataset
from authzbench.systems import declared
from authzbench.workloads.catalog import input_count, scenario
from authzbench.workloads.churn import SLO_CHECK_P95_MS, ChurnSweep
from authzbench.workloads.spec import PhaseSpec


def prepare(cfg: BenchConfig, store: RunStore | None = None) -> list[str]:
    """Start and load every selected backend; leaves servers running. Returns failures (one line each)."""
    cfg.validate()
    unsupported = cfg.servers.unsupported(cfg.data.model)
    failures = _skip_unsupported(unsupported, store, "prepare")
    names = [n for n in cfg.servers.backends if n not in unsupported]
    unbuilt = _build_first(names, cfg.servers.provision, store, failures, "prepare")
    ds = dataset_of(cfg.data)
    for name in names:
        if name in unbuilt:
            continue
        sess = None
        try:
            sess = Session(name, cfg.servers, cfg.data.model)
            load_backend(sess, ds, store, cfg.servers.reload)
        except Exception as e:  # noqa: BLE001 - a driver error fails this backend, not the run
            _backend_failed(failures, store, name, "prepare", e)
        except Interrupted:
            # A half-loaded server is no use later: stop what this prepare started (earlier ones stay).
            if sess is not None and sess.started_here:
                sess.stop()
            raise
    return failures


def bench(cfg: BenchConfig, store: RunStore) -> list[str]:
    """Run every scenario on every backend. Returns failures (one line each); never raises on a backend.

    With several visits, every backend is started and loaded on the first and its servers stay up until its
    last: visit 1 takes the backends in order, visit 2 in reverse order, and so on, each running its share
    of the rounds, so a slow period of the machine does not land on one backend only."""
    clear_internal_stop()
    cfg.validate()
    store.update_manifest(config=cfg.to_manifest())
    unsupported = cfg.servers.unsupported(cfg.data.model)
    failures = _skip_unsupported(unsupported, store, "bench")
    names = [n for n in cfg.servers.backends if n not in unsupported]
    unbuilt = _build_first(names, cfg.servers.provision, store, failures, "bench")
    with timed_step(store, None, "dataset and oracle"):
        ds, oracle = dataset_and_oracle(cfg.data, store)
    run = _BenchRun(cfg, store, ds, oracle, failures, _load_hosts(cfg.servers.workers_on, store))
    _preload_workers(names)
    names = [n for n in names if n not in unbuilt]
    try:
        with run_progress(_planned(cfg, ds, names)) as run.progress:
            _record_eta(store, run.progress.eta)
            for visit, name in visit_order(names, cfg.schedule.visits):
                run.visit(name, visit)
                _record_eta(store, run.progress.eta)
    finally:
        run.stop_all()
    if run.client is not None:
        run.client.close()
    return run.failures


@dataclass
class _BenchRun:
    """The state of one bench run across backends and visits: the sessions still up, the failures."""

    cfg: BenchConfig
    store: RunStore
    ds: Dataset
    oracle: Any
    failures: list[str]
    client: Any
    sessions: dict[str, Session] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    inputs_cache: dict[str, list] = field(default_factory=dict)
    pace: Pace = field(default_factory=lambda: Pace(os.cpu_count() or 1))
    progress: RunProgress | None = None

    def visit(self, name: str, visit: int) -> None:
        if name in self.failed:
            return
        cfg, store = self.cfg, self.store
        try:
            _speed_index(store, name, visit)
            sess = self.sessions.get(name)
            if sess is None:
                with timed_step(store, name, "start"):
                    sess = self.sessions[name] = Session(name, cfg.servers, cfg.data.model)
                if self.client is not None:
                    from authzbench.measure.distributed import check_endpoint

                    check_endpoint(self.client, name, cfg.servers.options.get("url") or
                                   os.environ.get(external_url_var(name), ""))
                with timed_step(store, name, "load"):
                    load_backend(sess, self.ds, store, cfg.servers.reload)
            self.bench_backend(sess, visit)
        except ResultsUnwritable:
            raise  # nothing more can be recorded: the run stops (bench's finally stops the servers)
        except Exception as e:  # noqa: BLE001 - a driver error fails this backend, not the run
            self.failed.add(name)
            if self.progress:
                self.progress.drop(name)
            _backend_failed(self.failures, store, name, "bench", e)
            self.stop(name)
        except Interrupted:
            store.append(rec.BackendError(backend=name, stage="bench",
                                          message=f"run interrupted by {signal_name()}"))
            raise
        if visit == cfg.schedule.visits - 1:
            self.stop(name)

    def bench_backend(self, sess: Session, visit: int) -> None:
        """This visit's phases of one loaded backend (_Visit)."""
        _Visit(self, sess, visit, self._other_pids(sess.name)).run_phases()

    def _other_pids(self, name: str) -> list[int]:
        """The other native servers up meanwhile, from the state dir: this run's sessions save theirs there,
        and so did the servers a sweep or `up` keeps running. Missing the kept ones, an in-process engine's
        tree took them for its own: chdb's memory read 6.0 GiB at `xl` in a sweep where the suite's own
        processes took about 2 GiB and the idle Cassandra alone 2.0."""
        return running_pids(name)

    def stop(self, name: str) -> None:
        sess = self.sessions.pop(name, None)
        if sess is not None and sess.started_here and not self.cfg.servers.keep_running:
            with timed_step(self.store, name, "stop"):
                sess.stop()

    def stop_all(self) -> None:
        for name in list(self.sessions):
            self.stop(name)


def _speed_index(store: RunStore, name: str, visit: int) -> None:
    """The machine-speed index (speed.py), before the visit's server starts or loads: the machine as the
    phases will find it, without this backend's own start-up or background work (a compaction after its
    load) counted as the machine's slowness."""
    try:
        with timed_step(store, name, "speed index"):
            s = speed.measure()
    # the index is context: never fails a backend
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        store.append(rec.SpeedIndex(backend=name, visit=visit, error=str(e)[:300]))
        say(f"[yellow]{name}: machine-speed index not measured: {e}[/yellow]")
        return
    store.append(s.record(backend=name, visit=visit))
    say(f"{name}: machine-speed index {s.index:.2f} (cpu {s.cpu_score:.2f}, loopback {s.rtt_score:.2f}; "
        "1.0 = the index's base machine, higher = faster)")


def _record_eta(store: RunStore, eta: RunEta) -> None:
    """The estimate as it stood (at the start and after each visit), so a run shows how well it held."""
    store.append(
        rec.Eta(done=eta.done, total=eta.total, elapsed_s=eta.elapsed_s(), left_s=eta.left_s_estimate(),
                overhead_s=eta.overhead_s()))
    say(f"run: {eta.line()}")


def _planned(cfg: BenchConfig, ds: Dataset, names: list[str]) -> dict[str, list[float]]:
    """Each backend's phases' planned seconds, for the run's estimate (a backend whose driver is missing
    plans none: it fails at its first visit)."""
    plan: dict[str, list[float]] = {}
    for name in names:
        try:
            traits = BackendTraits.of(name, cfg.servers.options)
        except Exception:  # noqa: BLE001 - reported at its visit
            plan[name] = []
            continue
        specs = phase_specs(cfg.schedule, cfg.mixed, traits, ds, cfg.churn)
        # a phase the backend cannot run at all is skipped at once: it adds nothing to the estimate
        plan[name] = [
            0.0 if not_offered(name, scenario(s).op) else planned_seconds(spec) for spec, s in specs]
    return plan


def _plan(cfg: BenchConfig, name: str, ds: Dataset) -> list[tuple[PhaseSpec, str]]:
    """The backend's phases of the whole run, from the schedule, the mixed load and its --consistency."""
    return phase_specs(cfg.schedule, cfg.mixed, BackendTraits.of(name, cfg.servers.options), ds, cfg.churn)


@dataclass
class _Visit:
    """One visit of one loaded backend: its phases in order, sharing the run's state (_BenchRun) and the
    visit's kept worker processes; each phase is run once or more by phase.attempt, its records going to the
    store as they come."""

    run: _BenchRun
    sess: Session
    visit: int
    others: list[int]

    def run_phases(self) -> None:
        """The visit's phases (phase_plan.phase_specs, this visit's share), in order."""
        cfg, sched, name = self.run.cfg, self.run.cfg.schedule, self.sess.name
        if self.visit == 0:
            self._record_server()
        if sched.pin:
            pin_cores(self.sess)
        plan = _plan(cfg, name, self.run.ds)
        specs = [(spec, sname) for spec, sname in plan if visit_of(sched, spec.repeat) == self.visit]
        checks = RestoreChecks.of(sched, plan, self.visit)
        # The visit's phases share their worker processes (pools.KeptWorkers); the servers' idle connections
        # to them between phases are the visit's, like the servers themselves.
        churn = ChurnSweep(cfg.targets.slo.get("check_p95_ms", SLO_CHECK_P95_MS), cfg.churn.freshness_s)
        pace, progress = self.run.pace, self.run.progress
        with KeptWorkers() as kept:
            seat = phase.PhaseSeat(
                self.sess, self.run.store, self.run.ds, self.run.oracle, sched, self.run.client, kept,
                self.others)
            for spec, sname in specs:
                sc, inputs = scenario(sname), self._inputs(sname)
                why = pace.too_slow(spec, sc.op) if pace and self.sess.dep.mode != "external" else ""
                if why := why or churn.stopped(spec) or not_offered(name, sc.op):
                    _skip(self.run.store, spec, why, progress)
                    continue
                for attempt in range(sched.max_reruns + 1):
                    spec.attempt, tap = attempt, churn.tap(spec)
                    rerun, res = phase.attempt(
                        seat, spec, inputs, _heavy(checks.heavy_user(spec), pace, name),
                        restore_check=checks.sampled(spec), tap=tap)
                    if not rerun:
                        break
                churn.judge(tap)
                if pace:
                    pace.note(spec, sc.op, res.ops, res.wall_s)
                if progress:
                    progress.finished(name, spec)

    def _record_server(self) -> None:
        name, ds, store = self.sess.name, self.run.ds, self.run.store
        with self.sess.backend(dataset_path=str(ds.path)) as b:
            info = b.server_info()
        store.append(rec.Server(backend=name, mode=self.sess.dep.mode, info=asdict(info),
                                endpoint=self.sess.dep.public_endpoint(), notes=self.sess.dep.notes,
                                concurrency_model=backend_class(name).concurrency))
        say(f"{name}: {info.label}")

    def _inputs(self, sname: str) -> list:
        """The scenario's inputs and expected answers, sampled once a run (the visits share them)."""
        cache, sc, sched = self.run.inputs_cache, scenario(sname), self.run.cfg.schedule
        if sname not in cache:
            n = input_count(sc, sched.iterations_scale)
            extra = {"dau": self.run.cfg.data.dau} if sc.model == "social" and sc.op != "roundtrip" else {}
            if sc.op == "churn" and self.run.cfg.churn.mix:  # a decide target's own mix of changes
                extra["mix"] = self.run.cfg.churn.mix
            with timed_step(self.run.store, None, f"inputs and expected answers of {sname}"):
                cache[sname] = sc.sampler(self.run.ds, self.run.oracle, n, **extra)
        return cache[sname]


def _skip(store: RunStore, spec: PhaseSpec, why: str, progress: RunProgress | None) -> None:
    store.append(rec.PhaseSkipped(phase=spec.phase_id, backend=spec.backend, scenario=spec.scenario,
                                  concurrency=spec.concurrency, repeat=spec.repeat, reason=why))
    say(f"{spec.backend}: {spec.phase_id} not run: {why}")
    if progress:
        progress.finished(spec.backend, spec)


def not_offered(name: str, op: str) -> str:
    """Why a backend cannot run a phase of this op at all (a system without a reverse lookup), else ""."""
    own = declared(name)
    return own.no_lookup if own is not None and op == "lookup" else ""


def _heavy(last_write: bool, pace: Pace | None, name: str) -> str:
    """How this phase's restore check covers the heaviest user: only after the backend's last writing phase,
    by lookup unless the run measured that lookup too slow (restore.heavy_restore)."""
    if not last_write:
        return ""
    return heavy_restore(pace.op_s(name, HEAVY_LOOKUP) if pace else None)


def _build_first(names: list[str], provision: str, store: RunStore | None, failures: list[str],
                 stage: str) -> set[str]:
    """Every build the backends `names` need, before any server starts (provision/builds.py); the backends
    whose build failed are recorded as failed and returned."""
    if not (todo := pending_builds(names, provision)):
        return set()
    with timed_step(store, None, "builds before measuring"):
        return build_all(
            todo, names, lambda name, e: _backend_failed(failures, store, name, f"{stage} (build)", e))


def _skip_unsupported(unsupported: dict[str, str], store: RunStore | None, stage: str) -> list[str]:
    """Record the backends that lack the chosen model (ServerChoice.unsupported) as failed, one line each,
    without starting them."""
    failures = []
    for name, why in unsupported.items():
        failures.append(f"{name}: {why}")
        say(f"[red]{name}: {why}[/red]")
        if store:
            store.append(rec.BackendError(backend=name, stage=stage, message=why))
    return failures


def _backend_failed(failures: list[str], store: RunStore | None, name: str, stage: str, e: Exception) -> None:
    """One line for the user and the report; an error that is not ours (a driver's, a bug) keeps its type
    and traceback in the results. The run goes on with the next backend."""
    ours = isinstance(e, UserError)
    line = str(e) if ours else _error_line(e)
    failures.append(f"{name}: {line}")
    say(f"[red]{name}: {line}[/red]")
    if store:
        store.append(rec.BackendError(backend=name, stage=stage, message=line,
                                      traceback=None if ours else traceback.format_exc()))


def _error_line(e: Exception) -> str:
    """A driver's error in one line. A gRPC error's first line is only "<_InactiveRpcError of RPC that
    terminated with:", which hid the status of a SpiceDB start-up failure in CI: its code and details."""
    code, details = getattr(e, "code", None), getattr(e, "details", None)
    if callable(code) and callable(details):
        with contextlib.suppress(Exception):
            return f"{type(e).__name__}: {code().name}: {details()}"[:500]
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]


def _load_hosts(workers_on: str | None, store: RunStore):
    """With --workers-on: a client of the Dask scheduler, the load hosts' versions recorded; else None."""
    if not workers_on:
        return None
    from authzbench.measure.distributed import connect, host_versions

    client = connect(workers_on)
    hv = host_versions(client)
    store.append(rec.LoadHosts(scheduler=workers_on, **hv))
    say(f"load hosts: {', '.join(sorted(hv['hosts']))}")
    for m in hv["driver_mismatches"]:
        say(f"[yellow]load host driver differs: {m}[/yellow]")
    return client


def _preload_workers(names: list[str]) -> None:
    classes = []
    for name in names:
        with contextlib.suppress(Exception):  # a backend that cannot be imported fails later, in its turn
            classes.append(backend_class(name))
    preload_worker_modules(classes)
