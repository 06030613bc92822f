"""prepare / bench / down: the main job, backend by backend, writing results as they are produced.

Servers started by `prepare` keep running (their PIDs and endpoint in .authzbench/servers/NAME.json)
so `bench` reuses them; `bench` alone prepares what is missing and stops what it started itself.
A backend that fails (cannot start, dies mid-run) is recorded and the run moves on to the next.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from authzbench.backends.base import Backend, BackendOptions, option_names, parse_options
from authzbench.backends.registry import BACKENDS, backend_class, entry, implementation, missing_driver
from authzbench.dataset import Dataset
from authzbench.errors import BackendUnavailable, UserError
from authzbench.generator import dataset_dir, default_data_dir, generate, reusable
from authzbench.generator.profiles import resolve
from authzbench.metrics import Monitor
from authzbench.provision.base import Deployment, pid_alive, say, stop_pid
from authzbench.provision.manager import MODES, default_mode, external_url_var, provision
from authzbench.results import ResultsUnwritable, RunStore
from authzbench.scenarios.catalog import (
    DEFAULT_DAU,
    DEFAULT_SCENARIOS_BY_MODEL,
    READ_SCENARIOS,
    SCRATCH_WRITES,
    scenario,
)
from authzbench.scenarios.runner import BackendFactory, PhaseSpec, preload_worker_modules, run_phase
from authzbench.scenarios.writes import MIXED_KINDS, mixed_targets
from authzbench.social_oracle import oracle_for
from authzbench.stopping import Interrupted, clear_internal_stop, polled, request_stop, signal_name
from authzbench.stopping import check as check_stop

# A phase is re-run when processes outside the run took more than this share of one core, on average, during
# its measured window (psutil: machine busy CPU minus the measured server's and the client's). Measured on
# this 2-core machine kind: a quiet make bench's phases see a few % (kernel threads, the other idle servers);
# a CPU-bound process beside the run shows ~70-100; 25 is far above the first and far below the second.
DISTURBED_CPU = 25.0

# A closed-loop worker is a process: measured 67 MiB unique memory each with the drivers imported
# (postgres + SpiceDB, forkserver child), so 70 MiB is what one more worker costs.
WORKER_BYTES = 70 * 2**20


def max_workers() -> int:
    """How many worker processes this machine can hold: free memory and the per-user process limit."""
    import resource

    by_memory = psutil.virtual_memory().available // WORKER_BYTES
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    by_procs = soft - len(psutil.pids()) if soft != resource.RLIM_INFINITY else by_memory
    return max(1, min(by_memory, by_procs))


def worker_limit_reason() -> str:
    avail = psutil.virtual_memory().available
    return (f"each worker is a process of ~{WORKER_BYTES // 2**20} MiB and {avail // 2**20:,} MiB of memory is "
            f"available; the process limit is ulimit -u")


def max_scheduled_ops(workers: int) -> int:
    """Open loop: each worker computes the whole schedule (8-byte floats); keep it within a quarter of
    the free memory."""
    return int(psutil.virtual_memory().available // 4 // (8 * max(1, workers)))


def _check_runnable(name: str, mode: str, options: dict[str, Any]) -> None:
    """Refuse, before anything starts, a backend that cannot run in `mode` here."""
    e = entry(name)
    if not e.impl:  # a backend without an adapter (cockroach)
        raise BackendUnavailable(f"--backend {name}: {e.why_not_native}")
    if mode == "native" and e.native is None:
        raise BackendUnavailable(f"--backend {name} cannot run natively: {e.why_not_native}")
    if mode == "external" and not e.in_process and not (options.get("url") or os.environ.get(
            external_url_var(name))):
        raise UserError(f"--provision external needs {external_url_var(name)} (a DSN or URL of the running server)")


def state_dir() -> Path:
    return Path(os.environ.get("AUTHZBENCH_STATE", ".authzbench"))


def default_backends() -> list[str]:
    return [n for n, e in BACKENDS.items() if e.default]


@dataclass
class BenchConfig:
    backends: list[str] = field(default_factory=default_backends)
    provision: str = field(default_factory=default_mode)
    profile: str = "baseline"
    model: str = "rebac"
    overrides: dict[str, str] = field(default_factory=dict)
    scenarios: list[str] | None = None  # default: every scenario of the model
    concurrency: list[int] = field(default_factory=lambda: [1, 8, 32])
    iterations_scale: float = 1.0  # multiply every scenario's default iterations (CI uses < 1)
    repeat: int = 1
    # The CLI's defaults are 3 rounds, 2 visits, 2 re-runs (cli.py); a config built in code measures each
    # phase once, as before rounds existed, unless it asks for them.
    rounds: int = 1  # each phase split into this many rounds, interleaved with the others' (see _phase_specs)
    visits: int = 1  # each backend visited this often (forward order, then reverse), its rounds spread over them
    max_reruns: int = 0  # a phase disturbed by foreign CPU is re-run at most this often
    disturbed_cpu: float = DISTURBED_CPU  # mean foreign CPU (% of one core) over a window that disturbs it
    pin: bool = False  # servers on the last core, client on the others (an isolation experiment)
    write_share: float = 0.01
    write_kind: str = "acl"  # mixed: acl | membership | hierarchy | org_admin | realistic (scenarios/writes.py)
    rate: float | None = None  # mixed: open loop at this rate instead of closed loop
    rates: list[float] = field(default_factory=list)  # mixed: one open-loop phase per rate (SLO per rate)
    stages: list[tuple[float, float]] = field(default_factory=list)
    duration_s: float = 10.0  # open loop duration when no stages are given
    dau: float = DEFAULT_DAU  # social: share of users that issue requests (the reference's sampling factor)
    slo: dict[str, float] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # backend options (consistency, batch sizes...)
    reload: bool = False
    keep_running: bool = False
    data_dir: Path | None = None
    workers_on: str | None = None  # tcp://SCHEDULER:8786: spread the workers over that Dask cluster's load hosts
    ingest_variants: str = "none"  # none | all | LABEL[,LABEL]: other load paths measured before the default
    max_load_minutes: float = 30.0  # a load that cannot finish within this stops, with its rate and projection

    def validate(self) -> None:
        """Every bad value is one UserError naming the option, before any dataset or server is touched."""
        if not self.backends:
            raise UserError("--backend: name at least one backend")
        self._validate_workers_on()
        if self.provision not in MODES:
            raise UserError(f"unknown provision mode {self.provision!r}; valid: {', '.join(MODES)}")
        for b in self.backends:
            _check_runnable(b, self.provision, self.options)
        if self.scenarios is None:
            self.scenarios = list(DEFAULT_SCENARIOS_BY_MODEL[self.model]) if self.model in DEFAULT_SCENARIOS_BY_MODEL \
                else []
        for s in self.scenarios:
            if scenario(s).model != self.model:
                raise UserError(f"scenario {s!r} belongs to the {scenario(s).model} model, not {self.model}")
        if not 0 < self.dau <= 1:
            raise UserError(f"--dau must be in (0, 1], got {self.dau}")
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise UserError("--concurrency values must be integers >= 1")
        if self.write_kind not in MIXED_KINDS:
            raise UserError(f"--write-kind must be one of {', '.join(MIXED_KINDS)}, got {self.write_kind!r}")
        if self.write_kind != "acl" and self.model != "rebac":
            raise UserError(f"--write-kind {self.write_kind} needs --model rebac (the social model writes followers)")
        if max(self.concurrency) > (limit := max_workers()):
            raise UserError(f"--concurrency {max(self.concurrency)}: at most {limit:,} workers can run here "
                            f"({worker_limit_reason()})")
        if "postgres" in self.backends and self.provision == "native":
            from authzbench.provision.native.postgres import BENCH_SETTINGS

            # one connection per worker, plus the run's own (server info, loaded-hash check) at most
            slots = int(BENCH_SETTINGS["max_connections"]) - 1
            if max(self.concurrency) > slots:
                raise UserError(f"--concurrency {max(self.concurrency)}: at most {slots} workers for postgres: "
                                f"the native server allows max_connections={BENCH_SETTINGS['max_connections']}, one "
                                f"connection per worker and one for the run")
        if not 0 <= self.write_share <= 1:
            raise UserError(f"--write-share must be between 0 and 1, got {self.write_share}")
        if not (0 < self.iterations_scale < math.inf) or self.repeat < 1:
            raise UserError("--iterations-scale must be > 0 and --repeat >= 1")
        self._validate_rounds()
        self._validate_open_loop()
        self._validate_slo()
        if self.data_dir is not None and self.data_dir.exists() and not self.data_dir.is_dir():
            raise UserError(f"--data-dir {self.data_dir} is not a directory")
        resolve(self.profile, {k: v for k, v in self.overrides.items()}, self.model)
        if not self.max_load_minutes > 0:
            raise UserError(f"--max-load-minutes must be > 0, got {self.max_load_minutes}")
        self._check_variants()
        self._check_options()

    def unsupported(self) -> dict[str, str]:
        """Chosen backends that do not implement the chosen model (from the registry: no import, no
        server): recorded as skipped with the reason, never started."""
        return {b: f"does not implement the {self.model!r} model" for b in self.backends
                if self.model not in entry(b).models}

    def _check_options(self) -> None:
        """Every option must be one of a chosen backend's (each backend then gets only its own, see
        Session): a typo is one line, before any server starts. Values are type-checked per backend."""
        known = set(option_names(BackendOptions))
        for b in self.backends:
            cls = options_class(b)
            if cls is not None:
                known |= option_names(cls)
                parse_options(cls, own_options(cls, self.options), b)
        unknown = sorted(set(self.options) - known)
        if unknown:
            raise UserError(f"unknown backend option{'s' * (len(unknown) > 1)} {', '.join(unknown)} "
                            f"(backends {', '.join(self.backends)}); valid: {', '.join(sorted(known))}")

    def _validate_open_loop(self) -> None:
        if self.rate is not None and not 0 < self.rate < math.inf:
            raise UserError(f"--rate must be > 0 ops/s, got {self.rate:g}")
        if not 0 < self.duration_s < math.inf:
            raise UserError(f"--duration must be > 0 s, got {self.duration_s:g}")
        for r in self.rates:
            if not 0 < r < math.inf:
                raise UserError(f"--rates: every rate must be > 0 ops/s, got {r:g}")
        for r, secs in self.stages:
            if not (0 <= r < math.inf and 0 < secs < math.inf):
                raise UserError(f"--stage {r:g}:{secs:g}: the rate must be >= 0 and the seconds > 0")
        steps = [("--rates", [(r, self.duration_s)]) for r in self.rates]
        if not steps and self.stages:
            steps = [("--stage", self.stages)]
        elif not steps and self.rate:
            steps = [("--rate", [(self.rate, self.duration_s)])]
        for opt, stages in steps:
            ops = sum(max(r, self.rate or 0) * secs for r, secs in stages)  # an upper bound of the ramps' ops
            if ops > (limit := max_scheduled_ops(max(self.concurrency))):
                raise UserError(f"{opt}: {ops:,.0f} ops scheduled in one phase, at most {limit:,} fit here "
                                f"(every worker holds the phase's schedule, 8 bytes per op, in memory)")

    def _validate_rounds(self) -> None:
        if self.rounds < 1 or self.max_reruns < 0:
            raise UserError("--rounds must be >= 1 and --max-reruns >= 0")
        if not 1 <= self.visits <= self.rounds * self.repeat:
            raise UserError(f"--visits must be between 1 and --rounds x --repeat ({self.rounds * self.repeat}): "
                            "each visit runs at least one round")
        if not 0 < self.disturbed_cpu < math.inf:
            raise UserError(f"--disturbed-cpu must be > 0 (% of one core), got {self.disturbed_cpu:g}")
        if self.pin and len(os.sched_getaffinity(0)) < 2:
            raise UserError("--pin needs at least 2 usable cores (servers on one, the client on the others)")

    def _validate_slo(self) -> None:
        for key, opt in (("check_p95_ms", "--slo-check-p95"), ("write_p95_ms", "--slo-write-p95")):
            v = self.slo.get(key)
            if v is not None and not 0 < v < math.inf:
                raise UserError(f"{opt} must be > 0 ms, got {v:g}")
        v = self.slo.get("success")
        if v is not None and not 0 < v <= 1:
            raise UserError(f"--slo-success is a ratio in (0, 1], got {v:g}")

    def _validate_workers_on(self) -> None:
        if not self.workers_on:
            return
        if self.provision != "external":
            raise UserError("--workers-on needs --provision external: the load hosts reach servers you run "
                            "(AUTHZBENCH_<BACKEND>_URL)")
        from authzbench.scenarios.distributed import require

        require()
        for b in self.backends:
            if backend_class(b).concurrency == "thread":
                raise UserError(f"--workers-on: {b} is an in-process engine (its workers are threads of this "
                                "process) and cannot be spread over hosts")

    def _check_variants(self) -> None:
        if self.ingest_variants in ("none", "all"):
            return
        known: set[str] = set()
        for b in self.backends:
            try:
                known |= set(backend_class(b).ingest_variants)
            except (UserError, ImportError, AttributeError):
                continue  # a backend that cannot load here says so when it runs
        wanted = [v.strip() for v in self.ingest_variants.split(",") if v.strip()]
        bad = [v for v in wanted if v not in known] or ([] if wanted else [self.ingest_variants])
        if bad:
            raise UserError(f"--ingest-variants: unknown ingest variant {bad[0]!r} for {', '.join(self.backends)}; "
                            "valid: none, all"
                            + "".join(f", {k}" for k in sorted(known)))

    def selected_variants(self, offered: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if self.ingest_variants == "none":
            return {}
        if self.ingest_variants == "all":
            return dict(offered)
        wanted = {v.strip() for v in self.ingest_variants.split(",")}
        return {k: v for k, v in offered.items() if k in wanted}

    def dataset(self) -> Dataset:
        params = resolve(self.profile, self.overrides, self.model)
        path = dataset_dir(self.data_dir or default_data_dir(), self.model, self.profile, params.seed,
                           {k: v for k, v in self.overrides.items() if k != "seed"})
        if (ds := reusable(path, params)) is not None:
            return ds
        say(f"generating dataset {self.model}/{self.profile} -> {path}")
        return generate(self.profile, path, overrides=self.overrides, model=self.model)


def options_class(name: str) -> type[BackendOptions] | None:
    """The backend's Options dataclass; None when it has no adapter or lacks its driver (it fails later,
    alone, with that one line)."""
    e = entry(name)
    if not e.impl or missing_driver(name):
        return None
    return backend_class(name).Options


def own_options(cls: type[BackendOptions], options: dict[str, Any]) -> dict[str, Any]:
    """The options `cls` declares: the others belong to another chosen backend."""
    names = option_names(cls)
    return {k: v for k, v in options.items() if k in names}


# server state between commands ----------------------------------------------------------------

def _state_file(name: str) -> Path:
    return state_dir() / "servers" / f"{name}.json"


def _save_state(name: str, dep: Deployment, run_dir: Path) -> None:
    p = _state_file(name)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"mode": dep.mode, "endpoint": dep.endpoint, "pids": dep.pids,
                             "containers": dep.containers, "notes": dep.notes, "run_dir": str(run_dir)}, indent=2))


def _load_state(name: str) -> dict | None:
    p = _state_file(name)
    if not p.is_file():
        return None
    st = json.loads(p.read_text())
    if st["mode"] == "native" and not all(pid_alive(pid) for pid in st["pids"] if pid != os.getpid()):
        return None
    return st


def stop_saved(name: str) -> bool:
    """Stop servers a previous `prepare` left running. Only the PIDs we recorded are signalled."""
    p = _state_file(name)
    if not p.is_file():
        return False
    st = json.loads(p.read_text())
    if st["mode"] == "native":
        for pid in st["pids"]:  # recorded in start order: the server before its datastore
            if pid != os.getpid():
                stop_pid(pid)
    elif st["mode"] == "compose":
        from authzbench.provision.compose import compose_down

        compose_down(name)
    p.unlink()
    return True


class Session:
    """One backend's servers for the duration of a command."""

    def __init__(self, name: str, cfg: BenchConfig, reuse: bool = True):
        self.name, self.cfg = name, cfg
        self.started_here = False
        st = _load_state(name) if reuse else None
        if st and st["mode"] == cfg.provision:
            self.dep = Deployment(name, st["mode"], st["endpoint"], st["pids"], st.get("containers", []),
                                  st.get("notes", []))
            say(f"{name}: reusing running servers (pids {st['pids']})")
        else:
            stop_saved(name)
            run_dir = state_dir() / "servers" / name
            shutil.rmtree(run_dir, ignore_errors=True)
            say(f"{name}: starting ({cfg.provision})")
            t0 = time.perf_counter()
            self.dep = provision(name, cfg.provision, run_dir.resolve(), dict(cfg.options))
            self.start_seconds = time.perf_counter() - t0
            self.started_here = True
            if not entry(name).in_process:
                _save_state(name, self.dep, run_dir)
        self.options = {**cfg.options, "backend_name": name, "model": cfg.model}

    def backend(self, **extra: Any) -> Backend:
        cls = backend_class(self.name)
        return cls(self.dep.endpoint, own_options(cls.Options, {**self.options, **extra}))

    def factory(self, **extra: Any) -> BackendFactory:
        opts = own_options(backend_class(self.name).Options, {**self.options, **extra})
        return BackendFactory(implementation(self.name), self.dep.endpoint, opts)

    def stop(self) -> None:
        if entry(self.name).in_process:
            self.dep.stop()
            return
        if self.dep._stoppers:
            self.dep.stop()
            with contextlib.suppress(FileNotFoundError):
                _state_file(self.name).unlink()
        else:
            stop_saved(self.name)


def monitor_for(sess: Session, sink, others: list[int] | None = None) -> Monitor:
    """psutil on native PIDs; the docker SDK's stats for compose containers; nothing for external.
    `others`: the other backends' servers this run keeps up between visits (their CPU is foreign)."""
    if sess.dep.mode == "compose" and sess.dep.containers:
        from authzbench.provision.compose import container_stats

        ids = list(sess.dep.containers)
        return Monitor([], sink, container_stats=lambda: container_stats(ids), others=others)
    return Monitor(sess.dep.pids if sess.dep.mode == "native" else [], sink, others=others)


def load_backend(sess: Session, ds: Dataset, store: RunStore | None, reload: bool) -> dict:
    """Create schema, bulk load, build; skipped when the same dataset hash is already loaded. A backend's
    ingest variants are each measured by a full reload before the default path loads last."""
    name = sess.name
    with sess.backend(dataset_path=str(ds.path)) as b:
        if not reload and b.loaded_hash() == ds.hash:
            say(f"{name}: dataset {ds.hash[:12]} already loaded, not reloading (--reload to force)")
            rec = {"type": "ingest_skipped", "backend": name, "dataset_hash": ds.hash}
            prior = _state_file(name).with_suffix(".load.json")
            if prior.is_file():
                rec["previous"] = json.loads(prior.read_text())
            if store:
                store.append(rec)
            return rec
        variants = sess.cfg.selected_variants(type(b).ingest_variants)
    for label, options in variants.items():
        try:
            _load_once(sess, ds, store, label, options)
        except LoadTooSlow as e:  # a slow alternative path must not cost the default one its run
            say(f"[yellow]{e}[/yellow]")
            if store:
                store.append({"type": "backend_error", "backend": name, "stage": f"ingest via {label}",
                              "message": str(e)})
    rec = _load_once(sess, ds, store, None, {})
    if not entry(name).in_process:
        _state_file(name).with_suffix(".load.json").write_text(json.dumps(rec))
    return rec


def _load_once(sess: Session, ds: Dataset, store: RunStore | None, variant: str | None,
               options: dict[str, Any]) -> dict:
    """Drop, create schema, load through the default path or an ingest variant, build, mark loaded."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    name = sess.name
    what = f"{name} via {variant}" if variant else name
    with sess.backend(dataset_path=str(ds.path), **options) as b:
        info = b.server_info()
        b.drop()
        b.create_schema()
        total = ds.total_relationships
        with Progress(TextColumn(f"[bold]{what}[/] load"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,}"),
                      TimeRemainingColumn(), transient=True) as prog:
            task = prog.add_task("load", total=total)
            t0 = time.perf_counter()
            phase = f"{name}/ingest" + (f" via {variant}" if variant else "")
            bound = LoadBound(what, total, sess.cfg.max_load_minutes * 60)
            with monitor_for(sess, lambda s: store and store.append(
                    {"type": "monitor", "backend": name, "phase": phase, **s})):
                try:
                    stats = b.load(ds, lambda n: (prog.advance(task, n), bound(n)))
                except LoadTooSlow as e:
                    if store:
                        store.append({"type": "ingest_bounded", "backend": name, "variant": variant,
                                      "dataset_hash": ds.hash, **e.figures})
                    raise
                load_s = time.perf_counter() - t0
                t1 = time.perf_counter()
                build = b.build()
                build_s = time.perf_counter() - t1
        b.mark_loaded(ds.hash)
        footprint = b.footprint()
    rec = {"type": "ingest", "backend": name, "variant": variant, "server": asdict(info), "dataset_hash": ds.hash,
           "relationships": total, "acl_relationships": ds.acl_relationships, "rows": stats.rows,
           "documents": stats.documents, "batch_rows": stats.batch_rows, "batch_seconds": stats.batch_seconds,
           "load_seconds": load_s, "build": asdict(build) if build else None, "build_seconds": build_s,
           "footprint_bytes": footprint, "notes": stats.notes,
           "start_seconds": getattr(sess, "start_seconds", None)}
    say(f"{what}: loaded {total:,} relationships in {load_s:.1f} s "
        f"({total / max(load_s, 1e-9):,.0f}/s) + build {build_s:.1f} s")
    if store:
        store.append(rec)
    return rec


def _skip_unsupported(cfg: BenchConfig, store: RunStore | None, stage: str) -> list[str]:
    """Record the backends that lack the chosen model as failed, one line each, without starting them."""
    failures = []
    for name, why in cfg.unsupported().items():
        failures.append(f"{name}: {why}")
        say(f"[red]{name}: {why}[/red]")
        if store:
            store.append({"type": "backend_error", "backend": name, "stage": stage, "message": why})
    return failures


class LoadTooSlow(UserError):
    """A load stopped at --max-load-minutes (or projected past it): its figures go to the results."""

    def __init__(self, message: str, figures: dict[str, float]):
        super().__init__(message)
        self.figures = figures


class LoadBound:
    """Called with each progress step of a load: stops it (raises LoadTooSlow from the loading thread)
    when the elapsed time passes the bound, or, once progress has been reported for 30 s or a tenth of
    the bound, when the rate since the first report projects the whole load past 1.1x the bound (Cassandra loaded baseline at 2.5k/s: at
    `large` that is ~35 min, known after the first 30 s)."""

    def __init__(self, what: str, total: int, bound_s: float):
        self.what, self.total, self.bound_s = what, total, bound_s
        self.done, self.t0 = 0, time.perf_counter()
        self.first: tuple[float, int] | None = None

    def __call__(self, n: int) -> None:
        now = time.perf_counter()
        if self.first is None:  # the rate is measured from the first progress: a backend's set-up before
            self.first = (now, self.done)  # it (Cassandra's closure: ~15 s at large) is not a rate
        self.done += n
        elapsed, (t1, d1) = now - self.t0, self.first
        rate = (self.done - d1) / (now - t1) if now > t1 else 0.0
        projected = (now - self.t0) + (self.total - self.done) / rate if rate > 0 else float("inf")
        early = now - t1 >= min(30.0, self.bound_s / 10) and projected > 1.1 * self.bound_s
        if elapsed > self.bound_s or early:
            figures = {"loaded": self.done, "relationships": self.total, "seconds": elapsed,
                       "rels_per_s": rate, "projected_seconds": projected, "bound_seconds": self.bound_s}
            raise LoadTooSlow(
                f"{self.what}: load stopped after {elapsed:.0f} s at {self.done:,} of {self.total:,} relationships "
                f"({rate:,.0f}/s); the whole load projects to {projected / 60:,.1f} min, over --max-load-minutes "
                f"{self.bound_s / 60:g}", figures)


def _backend_failed(failures: list[str], store: RunStore | None, name: str, stage: str, e: Exception) -> None:
    """One line for the user and the report; an error that is not ours (a driver's, a bug) keeps its type
    and traceback in the results. The run goes on with the next backend."""
    ours = isinstance(e, UserError)
    line = str(e) if ours else f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]
    failures.append(f"{name}: {line}")
    say(f"[red]{name}: {line}[/red]")
    if store:
        rec = {"type": "backend_error", "backend": name, "stage": stage, "message": line}
        if not ours:
            rec["traceback"] = traceback.format_exc()
        store.append(rec)


def prepare(cfg: BenchConfig, store: RunStore | None = None) -> list[str]:
    """Start and load every selected backend; leaves servers running. Returns failures (one line each)."""
    cfg.validate()
    ds = cfg.dataset()
    failures = _skip_unsupported(cfg, store, "prepare")
    for name in cfg.backends:
        if name in cfg.unsupported():
            continue
        sess = None
        try:
            sess = Session(name, cfg)
            load_backend(sess, ds, store, cfg.reload)
        except Exception as e:  # noqa: BLE001 - a driver error fails this backend, not the run
            _backend_failed(failures, store, name, "prepare", e)
        except Interrupted:
            # A half-loaded server is no use later: stop what this prepare started (earlier ones stay).
            if sess is not None and sess.started_here:
                sess.stop()
            raise
    return failures


def _consistency_specs(cfg: BenchConfig, modes: tuple[str, ...], iters: int, common: dict) -> list[PhaseSpec]:
    """A write scenario once more per other read consistency mode of the backend (SpiceDB: stale allows under
    minimize_latency vs at_least_as_fresh with the write's ZedToken), at the first concurrency level. Capped
    at 20 ops: under a quantized snapshot each write takes up to the quantization window (5 s) to show."""
    chosen = cfg.options.get("consistency") or (modes[0] if modes else "")
    return [PhaseSpec(mode="closed", concurrency=cfg.concurrency[0], iterations=min(iters, _split(20, cfg.rounds)),
                      consistency=m, **common) for m in modes if m != chosen]


def _split(n: int, rounds: int) -> int:
    return max(1, math.ceil(n / rounds))


def _round_specs(cfg: BenchConfig, name: str, ds: Dataset, conc_model: str, modes: tuple[str, ...],
                 rnd: int) -> list[tuple[PhaseSpec, str]]:
    """One round: every scenario x concurrency once, each with 1/rounds of the phase's ops, warm-up, budget
    and the ops its budget waits for (a figure merges its rounds back to the whole phase's ops)."""
    specs = []
    for sname in cfg.scenarios or []:
        sc = scenario(sname)
        if sc.op == "ingest":
            continue
        iters = _split(max(1, round(sc.iterations * cfg.iterations_scale)), cfg.rounds)
        warm = _split(max(0, round(sc.warmup * min(1.0, cfg.iterations_scale * 4))), cfg.rounds) if sc.warmup else 0
        budget = sc.budget_s * cfg.iterations_scale / cfg.rounds if sc.budget_s else None
        rel, obj_type = SCRATCH_WRITES[ds.model]
        common = dict(backend=name, scenario=sname, warmup=warm, timeout_s=sc.timeout_s,
                      max_seconds=sc.max_seconds, repeat=rnd, n_resources=ds.entities[obj_type],
                      budget_s=budget, min_ops=_split(sc.min_ops, cfg.rounds) if sc.min_ops else 0,
                      scratch_user=ds.entities["user"], scratch_relation=rel)
        if sc.op == "mixed":
            common["write_share"] = cfg.write_share
            if ds.model == "rebac":
                common.update(write_kind=cfg.write_kind, write_targets=mixed_targets(ds))
            if open_loop := _open_loop_specs(cfg, common, sname):
                # a rate step or a ramp is one schedule: not split; it runs in the first round only
                specs += open_loop if rnd % cfg.rounds == 0 else []
                continue
        for c in cfg.concurrency:
            if conc_model == "thread" and c > 8:
                continue  # in-process engines: more threads only measure the GIL
            specs.append((PhaseSpec(mode="closed", concurrency=c, iterations=iters,
                                    input_offset=(rnd % cfg.rounds) * iters, **common), sname))
        if sc.op == "write":
            specs += [(spec, sname) for spec in _consistency_specs(cfg, modes, iters, common)]
    return specs


def _open_loop_specs(cfg: BenchConfig, common: dict, sname: str) -> list[tuple[PhaseSpec, str]]:
    common = {**common, "warmup": common["warmup"] * cfg.rounds}
    if cfg.rates:  # a step per rate: the report finds the highest rate that passes
        return [(PhaseSpec(mode="open", concurrency=max(cfg.concurrency), stages=[(r, cfg.duration_s)],
                           start_rate=r, **common), sname) for r in cfg.rates]
    if cfg.rate or cfg.stages:
        stages = cfg.stages or [(cfg.rate, cfg.duration_s)]
        start_rate = cfg.rate if not cfg.stages else (cfg.rate or 0.0)
        return [(PhaseSpec(mode="open", concurrency=max(cfg.concurrency), stages=stages, start_rate=start_rate,
                           **common), sname)]
    return []


def _phase_specs(cfg: BenchConfig, name: str, ds: Dataset, conc_model: str,
                 modes: tuple[str, ...] = ()) -> list[tuple[PhaseSpec, str]]:
    """Every round of every repeat, each round in a rotated order: round k starts k/rounds of the way into
    the list, so a slow period of the machine during a backend's span lands on every scenario alike and
    the spread between rounds measures it (Google Benchmark's random interleaving, asv's rounds)."""
    specs = []
    for rnd in range(cfg.rounds * cfg.repeat):
        one = _round_specs(cfg, name, ds, conc_model, modes, rnd)
        k = (rnd % cfg.rounds) * len(one) // cfg.rounds
        specs += one[k:] + one[:k]
    return specs


def visit_order(names: list[str], visits: int) -> list[tuple[int, str]]:
    """(visit, backend) in the order bench runs them: forward, then reverse, then forward..."""
    return [(v, n) for v in range(visits) for n in (names if v % 2 == 0 else names[::-1])]


def visit_of(cfg: BenchConfig, rnd: int) -> int:
    """Rounds alternate between visits: with 3 rounds and 2 visits, rounds 0 and 2 run in the first visit
    (backends in order) and round 1 in the second (backends in reverse order)."""
    return rnd % cfg.visits


def _phase_sink(store: RunStore):
    """store.append for a phase's records (also called from the monitor's thread): when the results dir
    stops taking writes, the phase is stopped like on a signal (workers end, nothing hangs) and the run
    then ends with that one error."""

    def append(rec: dict) -> None:
        try:
            store.append(rec)
        except ResultsUnwritable as e:
            request_stop("an unwritable results directory", e)

    return append


@contextlib.contextmanager
def timed_step(store: RunStore | None, backend: str | None, step: str):
    """One step of the run's timeline (report/timeline.py), recorded when it ends, however it ends."""
    t0_wall, t0 = time.time(), time.perf_counter()
    try:
        yield
    finally:
        if store is not None:
            store.append({"type": "step", "backend": backend, "step": step, "t0": t0_wall,
                          "seconds": time.perf_counter() - t0})


def _preload_workers(cfg: BenchConfig) -> None:
    classes = []
    for name in cfg.backends:
        with contextlib.suppress(Exception):  # a backend that cannot be imported fails later, in its turn
            classes.append(backend_class(name))
    preload_worker_modules(classes)


def bench(cfg: BenchConfig, store: RunStore) -> list[str]:
    """Run every scenario on every backend. Returns failures (one line each); never raises on a backend.

    With several visits, every backend is started and loaded on the first and its servers stay up until its
    last: visit 1 takes the backends in order, visit 2 in reverse order, and so on, each running its share
    of the rounds, so a slow period of the machine does not land on one backend only."""
    clear_internal_stop()
    cfg.validate()
    store.update_manifest(config={k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()})
    with timed_step(store, None, "dataset and oracle"):
        ds, oracle = _dataset_and_oracle(cfg, store)
    run = _BenchRun(cfg, store, ds, oracle, _skip_unsupported(cfg, store, "bench"), _load_hosts(cfg, store))
    _preload_workers(cfg)
    names = [n for n in cfg.backends if n not in cfg.unsupported()]
    try:
        for visit, name in visit_order(names, cfg.visits):
            run.visit(name, visit)
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

    def visit(self, name: str, visit: int) -> None:
        if name in self.failed:
            return
        cfg, store = self.cfg, self.store
        try:
            sess = self.sessions.get(name)
            if sess is None:
                with timed_step(store, name, "start"):
                    sess = self.sessions[name] = Session(name, cfg)
                if self.client is not None:
                    from authzbench.scenarios.distributed import check_endpoint

                    check_endpoint(self.client, name, cfg.options.get("url") or
                                   os.environ.get(external_url_var(name), ""))
                with timed_step(store, name, "load"):
                    load_backend(sess, self.ds, store, cfg.reload)
            _bench_backend(cfg, sess, self.ds, self.oracle, store, self.inputs_cache, self.client,
                           visit=visit, others=self._other_pids(name))
        except ResultsUnwritable:
            raise  # nothing more can be recorded: the run stops (bench's finally stops the servers)
        except Exception as e:  # noqa: BLE001 - a driver error fails this backend, not the run
            self.failed.add(name)
            _backend_failed(self.failures, store, name, "bench", e)
            self.stop(name)
        except Interrupted:
            store.append({"type": "backend_error", "backend": name, "stage": "bench",
                          "message": f"run interrupted by {signal_name()}"})
            raise
        if visit == cfg.visits - 1:
            self.stop(name)

    def _other_pids(self, name: str) -> list[int]:
        return [pid for n, s in self.sessions.items() if n != name and s.dep.mode == "native"
                for pid in s.dep.pids if pid != os.getpid()]

    def stop(self, name: str) -> None:
        sess = self.sessions.pop(name, None)
        if sess is not None and sess.started_here and not self.cfg.keep_running:
            with timed_step(self.store, name, "stop"):
                sess.stop()

    def stop_all(self) -> None:
        for name in list(self.sessions):
            self.stop(name)


def _dataset_and_oracle(cfg: BenchConfig, store: RunStore):
    """The dataset (generated or reused) and its oracle, both recorded with the distribution table."""
    ds = cfg.dataset()
    say(f"dataset {ds.path} ({ds.total_relationships:,} relationships, hash {ds.hash[:12]})")
    store.update_manifest(dataset={"path": str(ds.path), "profile": ds.profile, "model": ds.model,
                                   "hash": ds.hash, "counts": ds.counts, "entities": ds.entities,
                                   "params": ds.manifest.get("params"), "relationships": ds.total_relationships})
    t0 = time.perf_counter()
    oracle = oracle_for(ds)
    store.append({"type": "oracle", "seconds": time.perf_counter() - t0})
    from authzbench.generator.stats import anchors, distribution

    store.append({"type": "distribution", "rows": distribution(ds, oracle),
                  "anchors": anchors(oracle) if ds.model == "rebac" else {"dau": cfg.dau}})
    return ds, oracle


def _bench_backend(cfg: BenchConfig, sess: Session, ds: Dataset, oracle, store: RunStore,
                   inputs_cache: dict[str, list], client, visit: int = 0, others: list[int] | None = None) -> None:
    """This visit's phases of one loaded backend, in order; each phase's records go to the store as they come."""
    name, cls = sess.name, backend_class(sess.name)
    if visit == 0:
        with sess.backend(dataset_path=str(ds.path)) as b:
            info = b.server_info()
        store.append({"type": "server", "backend": name, "mode": sess.dep.mode, "info": asdict(info),
                      "endpoint": sess.dep.public_endpoint(), "notes": sess.dep.notes,
                      "concurrency_model": cls.concurrency})
        say(f"{name}: {info.label}")
    if cfg.pin:
        pin_cores(sess)
    for spec, sname in _phase_specs(cfg, name, ds, cls.concurrency, cls.consistency_modes):
        if visit_of(cfg, spec.repeat) != visit:
            continue
        sc = scenario(sname)
        if sname not in inputs_cache:
            n = max(sc.iterations, round(sc.iterations * cfg.iterations_scale)) if sc.op != "lookup" else 1
            extra = {"dau": cfg.dau} if sc.model == "social" and sc.op != "roundtrip" else {}
            with timed_step(store, None, f"inputs and expected answers of {sname}"):
                inputs_cache[sname] = sc.sampler(ds, oracle, n, **extra)
        for attempt in range(cfg.max_reruns + 1):
            spec.attempt = attempt
            if not _attempt(cfg, sess, ds, oracle, store, spec, inputs_cache[sname], client, others or []):
                break


def _attempt(cfg: BenchConfig, sess: Session, ds: Dataset, oracle, store: RunStore, spec: PhaseSpec,
             inputs: list, client, others: list[int]) -> bool:
    """Run one phase once; True when foreign CPU disturbed it and a re-run is still allowed."""
    name, sc = sess.name, scenario(spec.scenario)
    cls = backend_class(name)
    say(f"{name}: {spec.phase_id}")
    sink = _phase_sink(store)
    mon = monitor_for(sess, lambda s, pid=spec.phase_id, sink=sink: sink(
        {"type": "monitor", "backend": name, "phase": pid, **s}), others).gated()
    with mon, polled():  # samples only while ops are measured; a signal ends the phase, recorded
        mode = {"consistency": spec.consistency} if spec.consistency else {}
        # the scenario's per-op bound reaches the driver (statement/request/gRPC timeouts)
        factory = sess.factory(dataset_path=str(ds.path), timeout_s=spec.timeout_s, **mode)
        res = _run_phase(spec, factory, inputs, sink, cls.concurrency, mon.window, client)
    rerun = _judge_disturbance(cfg, store, spec, mon.disturbance(), res.status)
    if sc.op in ("write", "mixed"):
        check_stop()  # a stopped run ends now: the restore check can take minutes on a slow backend
        with timed_step(store, name, f"restore check after {spec.phase_id}"):
            verify_restored(sess, ds, oracle, store, spec.phase_id,
                            write_ops=[o for inp in inputs for o in inp[1:] if o] if sc.op == "write" else None,
                            clean_all=res.stopped_workers > 0)
    check_stop()
    if res.status == "failed":
        say(f"[red]{name}: {spec.phase_id} failed: {res.reason}[/red]")
    elif res.status == "incomplete":
        say(f"[yellow]{name}: {spec.phase_id} incomplete: {res.reason}[/yellow]")
    return rerun


def _judge_disturbance(cfg: BenchConfig, store: RunStore, spec: PhaseSpec, d, status: str) -> bool:
    """Record what else ran during the phase; True when it should run again (disturbed, re-runs left)."""
    if d is None:
        return False
    disturbed = d.foreign_cpu > cfg.disturbed_cpu
    rerun = disturbed and spec.attempt < cfg.max_reruns and status != "failed"
    store.append({"type": "disturbance", "phase": spec.phase_id, "backend": spec.backend, "attempt": spec.attempt,
                  "threshold": cfg.disturbed_cpu, "disturbed": disturbed, "rerun": rerun, **d.as_record()})
    if disturbed:
        say(f"[yellow]{spec.backend}: {spec.phase_id} disturbed: other processes used {d.foreign_cpu:.0f}% of a "
            f"core (threshold {cfg.disturbed_cpu:g}%){'; running it again' if rerun else ''}[/yellow]")
    return rerun


def pin_cores(sess: Session) -> None:
    """The isolation experiment (--pin): the server's processes on the last core, this process and its
    workers (forked from it, they inherit it) on the others. Nothing to split for an in-process engine."""
    if sess.dep.mode != "native" or entry(sess.name).in_process:
        return
    cores = sorted(os.sched_getaffinity(0) | {c for c in range(os.cpu_count() or 1)})
    server, client = {cores[-1]}, set(cores[:-1])
    pinned = set()
    for pid in sess.dep.pids:
        with contextlib.suppress(psutil.Error, OSError):
            for p in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
                p.cpu_affinity(list(server))
                pinned.add(p.pid)
    me = psutil.Process()
    for p in [me, *me.children(recursive=True)]:  # the forkserver and workers; the servers are not Python
        with contextlib.suppress(psutil.Error, OSError):
            if p.pid not in pinned and (p.pid == me.pid or "python" in p.name()):
                p.cpu_affinity(list(client))


def _repair_scratch(b: Backend, ops: list, rec: dict, clean_all: bool = False) -> None:
    """Clean up the ops left midway (or all of them: deleting an edge an op never wrote writes nothing, it
    costs one recompute of the edge's reach). A stopped worker's group lock is waited out (EXPIRE_S)."""
    from authzbench.backends.locks import EXPIRE_S, WAIT_S, LockBusy
    from authzbench.scenarios.writes import clean_up, left_behind

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


def verify_restored(sess: Session, ds: Dataset, oracle, store: RunStore, phase_id: str, n_checks: int = 200,
                    write_ops: list | None = None, clean_all: bool = False) -> dict:
    """After a phase that wrote: every write was undone, so a sample of checks and the anchor lookups must
    equal the pristine oracle again (recorded; a difference counts as mismatches of the phase). The
    write scenarios' ops are cleaned up first: those whose probe shows them left midway, or every op when
    workers were stopped mid-op (clean_all: a half-done write can leave other users' rows behind)."""
    rebac = ds.model == "rebac"
    inputs = scenario("mixed" if rebac else "social_mixed").sampler(ds, oracle, n_checks)
    if rebac:  # the anchor lookups: the heaviest manage user's and a median viewer's
        inputs += [scenario(n).sampler(ds, oracle, 1)[0] for n in READ_SCENARIOS if scenario(n).op == "lookup"]
    rec = {"type": "restored", "backend": sess.name, "phase": phase_id, "checked": 0, "mismatches": 0, "examples": []}
    try:
        # fully consistent: a quantized snapshot (SpiceDB) could answer from before the undo
        with sess.backend(dataset_path=str(ds.path), consistency="fully_consistent") as b:
            if write_ops:
                _repair_scratch(b, write_ops, rec, clean_all)
            for op, args, expected in inputs:
                if op == "lookup":
                    ok = sorted(b.lookup_resources(*args)) == sorted(expected)
                else:
                    ok = bool(b.check(*args)) == expected
                rec["checked"] += 1
                if not ok:
                    rec["mismatches"] += 1
                    if len(rec["examples"]) < 5:
                        rec["examples"].append({"op": op, "args": list(args)})
    except Exception as e:  # noqa: BLE001 - a server that died is recorded, not raised
        rec["error"] = f"{type(e).__name__}: {str(e)[:200]}"
    store.append(rec)
    if rec.get("scratch_left"):
        say(f"[yellow]{sess.name}: after {phase_id}, {rec['scratch_left']} op(s) stopped midway had left "
            f"their grant in place; cleaned up ({rec['scratch_still_left']} still left)[/yellow]")
    if rec["mismatches"] or rec.get("error"):
        say(f"[red]{sess.name}: after {phase_id} the dataset is not as loaded: {rec}[/red]")
    return rec


def _load_hosts(cfg: BenchConfig, store: RunStore):
    """With --workers-on: a client of the Dask scheduler, the load hosts' versions recorded; else None."""
    if not cfg.workers_on:
        return None
    from authzbench.scenarios.distributed import connect, host_versions

    client = connect(cfg.workers_on)
    hv = host_versions(client)
    store.append({"type": "load_hosts", "scheduler": cfg.workers_on, **hv})
    say(f"load hosts: {', '.join(sorted(hv['hosts']))}")
    for m in hv["driver_mismatches"]:
        say(f"[yellow]load host driver differs: {m}[/yellow]")
    return client


def _run_phase(spec: PhaseSpec, factory: BackendFactory, inputs: list, sink, conc_model: str,
               on_window, client):
    if client is None:
        return run_phase(spec, factory, inputs, sink, conc_model, on_window=on_window)
    from authzbench.scenarios.distributed import run_phase_distributed

    return run_phase_distributed(spec, factory, inputs, sink, client, on_window=on_window)


def down(names: list[str]) -> list[str]:
    stopped = []
    for name in names:
        if stop_saved(name):
            stopped.append(name)
    return stopped


def running() -> list[str]:
    d = state_dir() / "servers"
    return sorted(p.stem for p in d.glob("*.json") if not p.name.endswith(".load.json")) if d.is_dir() else []
