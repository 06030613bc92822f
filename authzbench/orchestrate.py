"""prepare / bench / down: the main job, backend by backend, writing results as they are produced.

Servers started by `prepare` keep running (their PIDs and endpoint in .authzbench/servers/NAME.json)
so `bench` reuses them; `bench` alone prepares what is missing and stops what it started itself.
A backend that fails (cannot start, dies mid-run) is recorded and the run moves on to the next.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from authzbench.backends.base import Backend
from authzbench.backends.registry import BACKENDS, backend_class, entry, implementation
from authzbench.dataset import Dataset
from authzbench.errors import BackendUnavailable, UserError
from authzbench.generator import dataset_dir, default_data_dir, generate, reusable
from authzbench.generator.profiles import resolve
from authzbench.metrics import Monitor
from authzbench.provision.base import Deployment, pid_alive, say, stop_pid
from authzbench.provision.manager import MODES, default_mode, provision
from authzbench.results import RunStore
from authzbench.scenarios.catalog import DEFAULT_DAU, DEFAULT_SCENARIOS_BY_MODEL, SCRATCH_WRITES, scenario
from authzbench.scenarios.runner import BackendFactory, PhaseSpec, run_phase
from authzbench.social_oracle import oracle_for


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
    write_share: float = 0.01
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
    ingest_variants: str = "none"  # none | all | LABEL[,LABEL]: other load paths measured before the default
    max_load_minutes: float = 30.0  # a load that cannot finish within this stops, with its rate and projection

    def validate(self) -> None:
        for b in self.backends:
            entry(b)
        if self.provision not in MODES:
            raise UserError(f"unknown provision mode {self.provision!r}; valid: {', '.join(MODES)}")
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
        if not 0 <= self.write_share <= 1:
            raise UserError(f"--write-share must be between 0 and 1, got {self.write_share}")
        if self.iterations_scale <= 0 or self.repeat < 1:
            raise UserError("--iterations-scale must be > 0 and --repeat >= 1")
        resolve(self.profile, {k: v for k, v in self.overrides.items()}, self.model)
        if not self.max_load_minutes > 0:
            raise UserError(f"--max-load-minutes must be > 0, got {self.max_load_minutes}")
        self._check_variants()

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
            raise UserError(f"unknown ingest variant {bad[0]!r} for {', '.join(self.backends)}; valid: none, all"
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
            if name != "reference":
                _save_state(name, self.dep, run_dir)
        self.options = {**cfg.options, "backend_name": name, "model": cfg.model}

    def backend(self, **extra: Any) -> Backend:
        return backend_class(self.name)(self.dep.endpoint, {**self.options, **extra})

    def factory(self, **extra: Any) -> BackendFactory:
        return BackendFactory(implementation(self.name), self.dep.endpoint, {**self.options, **extra})

    def stop(self) -> None:
        if self.name == "reference":
            self.dep.stop()
            return
        if self.dep._stoppers:
            self.dep.stop()
            with contextlib.suppress(FileNotFoundError):
                _state_file(self.name).unlink()
        else:
            stop_saved(self.name)


def monitor_for(sess: Session, sink) -> Monitor:
    """psutil on native PIDs; the docker SDK's stats for compose containers; nothing for external."""
    if sess.dep.mode == "compose" and sess.dep.containers:
        from authzbench.provision.compose import container_stats

        ids = list(sess.dep.containers)
        return Monitor([], sink, container_stats=lambda: container_stats(ids))
    return Monitor(sess.dep.pids if sess.dep.mode == "native" else [], sink)


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
    if name != "reference":
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


def prepare(cfg: BenchConfig, store: RunStore | None = None) -> list[str]:
    """Start and load every selected backend; leaves servers running. Returns failures (one line each)."""
    cfg.validate()
    ds = cfg.dataset()
    failures = []
    for name in cfg.backends:
        try:
            sess = Session(name, cfg)
            load_backend(sess, ds, store, cfg.reload)
        except UserError as e:
            failures.append(f"{name}: {e}")
            say(f"[red]{name}: {e}[/red]")
            if store:
                store.append({"type": "backend_error", "backend": name, "stage": "prepare", "message": str(e)})
    return failures


def _phase_specs(cfg: BenchConfig, name: str, ds: Dataset, conc_model: str) -> list[tuple[PhaseSpec, str]]:
    specs = []
    for rep in range(cfg.repeat):
        for sname in cfg.scenarios:
            sc = scenario(sname)
            if sc.op == "ingest":
                continue
            iters = max(1, round(sc.iterations * cfg.iterations_scale))
            warm = max(0, round(sc.warmup * min(1.0, cfg.iterations_scale * 4)))
            rel, obj_type = SCRATCH_WRITES[ds.model]
            common = dict(backend=name, scenario=sname, warmup=warm, timeout_s=sc.timeout_s,
                          max_seconds=sc.max_seconds, repeat=rep, n_resources=ds.entities[obj_type],
                          scratch_user=ds.entities["user"], scratch_relation=rel)
            if sc.op == "mixed":
                common["write_share"] = cfg.write_share
                if cfg.rates:
                    for r in cfg.rates:  # a step per rate: the report finds the highest rate that passes
                        specs.append((PhaseSpec(mode="open", concurrency=max(cfg.concurrency),
                                                stages=[(r, cfg.duration_s)], start_rate=r, **common), sname))
                    continue
                if cfg.rate or cfg.stages:
                    stages = cfg.stages or [(cfg.rate, cfg.duration_s)]
                    start_rate = cfg.rate if not cfg.stages else (cfg.rate or 0.0)
                    specs.append((PhaseSpec(mode="open", concurrency=max(cfg.concurrency), stages=stages,
                                            start_rate=start_rate, **common), sname))
                    continue
            for c in cfg.concurrency:
                if conc_model == "thread" and c > 8:
                    continue  # in-process engines: more threads only measure the GIL
                specs.append((PhaseSpec(mode="closed", concurrency=c, iterations=iters, **common), sname))
    return specs


def bench(cfg: BenchConfig, store: RunStore) -> list[str]:
    """Run every scenario on every backend. Returns failures (one line each); never raises on a backend."""
    cfg.validate()
    store.update_manifest(config={k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()})
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
    inputs_cache: dict[str, list] = {}
    failures = []
    for name in cfg.backends:
        sess = None
        try:
            sess = Session(name, cfg)
            load_backend(sess, ds, store, cfg.reload)
            cls = backend_class(name)
            if cfg.model not in cls.models:
                raise BackendUnavailable(f"does not implement the {cfg.model!r} model")
            with sess.backend(dataset_path=str(ds.path)) as b:
                info = b.server_info()
            store.append({"type": "server", "backend": name, "mode": sess.dep.mode, "info": asdict(info),
                          "endpoint": sess.dep.public_endpoint(), "notes": sess.dep.notes,
                          "concurrency_model": cls.concurrency})
            say(f"{name}: {info.label}")
            for spec, sname in _phase_specs(cfg, name, ds, cls.concurrency):
                sc = scenario(sname)
                if sname not in inputs_cache:
                    n = max(sc.iterations, round(sc.iterations * cfg.iterations_scale)) if sc.op != "lookup" else 1
                    extra = {"dau": cfg.dau} if sc.model == "social" and sc.op != "roundtrip" else {}
                    inputs_cache[sname] = sc.sampler(ds, oracle, n, **extra)
                say(f"{name}: {spec.phase_id}")
                mon = monitor_for(sess, lambda s, pid=spec.phase_id, n_=name: store.append(
                    {"type": "monitor", "backend": n_, "phase": pid, **s})).gated()
                with mon:  # samples only while ops are measured, not while workers start
                    res = run_phase(spec, sess.factory(dataset_path=str(ds.path)), inputs_cache[sname],
                                    store.append, cls.concurrency, on_window=mon.window)
                if res.status == "failed":
                    say(f"[red]{name}: {spec.phase_id} failed: {res.reason}[/red]")
                elif res.status == "incomplete":
                    say(f"[yellow]{name}: {spec.phase_id} incomplete: {res.reason}[/yellow]")
        except UserError as e:
            failures.append(f"{name}: {e}")
            say(f"[red]{name}: {e}[/red]")
            store.append({"type": "backend_error", "backend": name, "stage": "bench", "message": str(e)})
        finally:
            if sess is not None and sess.started_here and not cfg.keep_running:
                sess.stop()
    return failures


def down(names: list[str]) -> list[str]:
    stopped = []
    for name in names:
        if stop_saved(name):
            stopped.append(name)
    return stopped


def running() -> list[str]:
    d = state_dir() / "servers"
    return sorted(p.stem for p in d.glob("*.json") if not p.name.endswith(".load.json")) if d.is_dir() else []
