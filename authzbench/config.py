"""A run's options, in the parts the run passes around, and their validation: every bad value is one line
naming the option, before any dataset is generated or server started. Also the machine's limits the
options are checked against.

Each part holds the options one step reads and checks its own values: DatasetChoice (which dataset),
ServerChoice (which servers, how started and loaded), Schedule (which phases, how often, how many workers),
MixedLoad (the mixed scenario's writes and open loop), Targets (what the report judges against). BenchConfig
is the composite the CLI builds: it validates the parts, then what holds between them (a backend that lacks
the model, a scenario of another model...). The manifest records it as one flat dict (to_manifest)."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import psutil

from authzbench.backends.base import BackendOptions, option_names, parse_options
from authzbench.backends.registry import backend_class, entry, missing_driver
from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.generator.profiles import resolve
from authzbench.provision.labels import check_labels, check_served
from authzbench.provision.manager import MODES, default_mode, external_url_var, runs_natively
from authzbench.provision.tiers import DEFAULT_TIER, TIERS, engines
from authzbench.systems import load, split, systems
from authzbench.workloads.catalog import DEFAULT_DAU, DEFAULT_SCENARIOS_BY_MODEL, scenario
from authzbench.workloads.churn import CHURN_FRESHNESS_S, CHURN_RATES, CHURN_READ_RATE, CHURN_STEP_S
from authzbench.workloads.writes import MIXED_KINDS

# A phase is re-run when processes outside the run took more than this share of one core, on average, during
# its measured window (psutil: the CPU of every process that is neither the measured server nor the client).
# Measured on this 2-core machine kind, a postgres bench at baseline (72 phases, 1-32 workers): median 0.7,
# p95 7, max 17; a CPU-bound process beside the run reads 70-100. 25 is far above the first, below the second.
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
    return (
        f"each worker is a process of ~{WORKER_BYTES // 2**20} MiB and {avail // 2**20:,} MiB of memory is "
        f"available; the process limit is ulimit -u")


def max_scheduled_ops(workers: int) -> int:
    """Open loop: each worker computes the whole schedule (8-byte floats); keep it within a quarter of
    the free memory."""
    return int(psutil.virtual_memory().available // 4 // (8 * max(1, workers)))


def _check_runnable(name: str, mode: str, options: dict[str, Any]) -> None:
    """Refuse, before anything starts, a backend that cannot run in `mode` here."""
    e = entry(name)
    if not e.adapter:  # a system declared without an adapter yet
        raise BackendUnavailable(f"--backend {name}: {e.why_not_native}")
    if mode == "native" and not runs_natively(name):
        raise BackendUnavailable(f"--backend {name} cannot run natively: {e.why_not_native}")
    if mode == "external" and not e.in_process and not (options.get("url") or os.environ.get(
            external_url_var(name))):
        raise UserError(
            f"--provision external needs {external_url_var(name)} (a DSN or URL of the running server)")


def _check_engine() -> None:
    """--provision compose with no engine that answers: one line before the dataset, not one per backend
    after it (a run without `authzbench engine up` printed 12 lines and wrote an empty report)."""
    from authzbench.provision.compose import require_engine

    try:
        require_engine()
    except BackendUnavailable as e:
        raise UserError(f"--provision compose: {e}; `authzbench engine up` finds or starts one") from None


def default_backends() -> list[str]:
    return [n for n, e in systems().items() if e.default]


def _finite_positive(x: float) -> bool:
    return 0 < x < math.inf


@dataclass
class DatasetChoice:
    """Which dataset: generated (or reused) by generator.obtain from these, before the oracle and loads."""

    model: str = "rebac"
    profile: str = "baseline"
    overrides: dict[str, str] = field(default_factory=dict)
    data_dir: Path | None = None
    dau: float = DEFAULT_DAU  # social: share of users that issue requests (the reference's sampling factor)
    # An existing dataset (`bench --dataset`: imported, or generated elsewhere) instead of the profile's.
    path: Path | None = None

    def validate(self) -> None:
        if not 0 < self.dau <= 1:
            raise UserError(f"--dau must be in (0, 1], got {self.dau}")
        if self.data_dir is not None and self.data_dir.exists() and not self.data_dir.is_dir():
            raise UserError(f"--data-dir {self.data_dir} is not a directory")
        _ = self.existing() if self.path else resolve(self.profile, dict(self.overrides), self.model)

    def existing(self):
        """The dataset at `path`: refused naming --dataset when incomplete or given --set / --seed."""
        from authzbench.schema.dataset import Dataset

        if self.overrides:
            raise UserError(f"--dataset {self.path}: --set and --seed move the generator's parameters")
        try:
            ds = Dataset.open(self.path)
        except UserError as e:
            raise UserError(f"--dataset: {e}") from None
        if ds.model != self.model:
            raise UserError(f"--dataset {self.path} is of the {ds.model} model: add --model {ds.model}")
        return ds


@dataclass
class ServerChoice:
    """Which backends, how servers start (servers.Session) and load (loading.py), where workers run."""

    backends: list[str] = field(default_factory=default_backends)
    provision: str = field(default_factory=default_mode)
    tier: str = DEFAULT_TIER  # the Zanzibar engines' tier: cached | strict (provision/tiers.py)
    options: dict[str, Any] = field(default_factory=dict)  # backend options (consistency, batch sizes...)
    reload: bool = False
    keep_running: bool = False
    ingest_variants: str = "none"  # none | all | LABEL[,LABEL]: other load paths measured before the default
    # a load that cannot finish within this stops, with its rate and projection
    max_load_minutes: float = 30.0
    # tcp://SCHEDULER:8786: the workers run on that Dask cluster's load hosts, against servers run elsewhere
    workers_on: str | None = None

    def validate(self) -> None:
        if not self.backends:
            raise UserError("--backend: name at least one backend")
        self._validate_workers_on()
        if self.provision not in MODES:
            raise UserError(f"unknown provision mode {self.provision!r}; valid: {', '.join(MODES)}")
        check_labels(self.backends, self.provision)  # NAME@VERSION: its form, before any backend is asked
        for b in self.backends:
            _check_runnable(b, self.provision, self.options)
        check_served(self.backends)
        if self.provision == "compose":
            _check_engine()
        if not self.max_load_minutes > 0:
            raise UserError(f"--max-load-minutes must be > 0, got {self.max_load_minutes}")
        self._check_variants()
        self._validate_tier()
        self._check_options()

    def _validate_workers_on(self) -> None:
        if not self.workers_on:
            return
        if self.provision != "external":
            raise UserError("--workers-on needs --provision external: the load hosts reach servers you run "
                            "(AUTHZBENCH_<BACKEND>_URL)")
        from authzbench.measure.distributed import require

        require()
        for b in self.backends:
            if backend_class(b).concurrency == "thread":
                raise UserError(f"--workers-on: {b} is an in-process engine (its workers are threads of this "
                                "process) and cannot be spread over hosts")

    def unsupported(self, model: str) -> dict[str, str]:
        """Chosen backends that do not implement `model` (from the registry: no import, no server): recorded
        as skipped with the reason, never started."""
        return {b: f"does not implement the {model!r} model"
                for b in self.backends
                if model not in entry(b).models}

    def selected_variants(self, offered: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if self.ingest_variants == "none":
            return {}
        if self.ingest_variants == "all":
            return dict(offered)
        wanted = {v.strip() for v in self.ingest_variants.split(",")}
        return {k: v for k, v in offered.items() if k in wanted}

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

    def _validate_tier(self) -> None:
        """--tier strict reads fully consistent (the option every adapter reads), so another --consistency
        contradicts it; and only the native recipes turn the engines' caches off (compose files and external
        servers run as they were configured)."""
        if self.tier not in TIERS:
            raise UserError(f"--tier must be one of {', '.join(TIERS)}, got {self.tier!r}")
        if self.tier != "strict":
            return
        given = self.options.get("consistency")
        if given and given != "fully_consistent":
            raise UserError(f"--tier strict reads fully_consistent; --consistency {given} contradicts it")
        tiered = [b for b in self.backends if split(b)[0] in engines()]
        if tiered and self.provision != "native":
            raise UserError(
                f"--tier strict needs --provision native for {', '.join(tiered)}: only the native "
                "recipes turn the engines' caches off")
        self.options["consistency"] = "fully_consistent"

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
            raise UserError(
                f"--ingest-variants: unknown ingest variant {bad[0]!r} for {', '.join(self.backends)}; "
                "valid: none, all" + "".join(f", {k}" for k in sorted(known)))


@dataclass
class Schedule:
    """Which phases run, how long, at which worker counts, in which order (phase_plan.py), and the re-runs
    of a disturbed phase (run/phase.py)."""

    scenarios: list[str] | None = None  # default: every scenario of the model (BenchConfig.validate)
    concurrency: list[int] = field(default_factory=lambda: [1, 8, 32])
    write_concurrency: list[int] = field(default_factory=lambda: [1])  # worker counts of the write scenarios
    iterations_scale: float = 1.0  # multiply every scenario's default iterations (CI uses < 1)
    repeat: int = 1
    # The CLI's defaults are 2 rounds, 2 visits, 2 re-runs (cli.py); a config built in code measures each
    # phase once, as before rounds existed, unless it asks for them.
    # each phase split into this many rounds, interleaved with the others' (see phase_plan.phase_specs)
    rounds: int = 1
    # each backend visited this often (forward order, then reverse), its rounds spread over them
    visits: int = 1
    max_reruns: int = 0  # a phase disturbed by foreign CPU is re-run at most this often
    disturbed_cpu: float = DISTURBED_CPU  # mean foreign CPU (% of one core) over a window that disturbs it
    pin: bool = False  # servers on the last core, client on the others (an isolation experiment)
    # every check at every worker count, not only the via-group check (catalog.LATENCY_ONLY)
    full_curve: bool = False

    def validate(self) -> None:
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise UserError("--concurrency values must be integers >= 1")
        if not self.write_concurrency or any(c < 1 for c in self.write_concurrency):
            raise UserError("--write-concurrency values must be integers >= 1")
        if max(self.concurrency + self.write_concurrency) > (limit := max_workers()):
            raise UserError(
                f"--concurrency {max(self.concurrency + self.write_concurrency)}: at most {limit:,} "
                f"workers can run here ({worker_limit_reason()})")
        if not _finite_positive(self.iterations_scale) or self.repeat < 1:
            raise UserError("--iterations-scale must be > 0 and --repeat >= 1")
        if self.rounds < 1 or self.max_reruns < 0:
            raise UserError("--rounds must be >= 1 and --max-reruns >= 0")
        if not 1 <= self.visits <= self.rounds * self.repeat:
            raise UserError(
                f"--visits must be between 1 and --rounds x --repeat ({self.rounds * self.repeat}): "
                "each visit runs at least one round")
        self._check_disturbed_cpu()
        if self.pin and len(os.sched_getaffinity(0)) < 2:
            raise UserError("--pin needs at least 2 usable cores (servers on one, the client on the others)")

    def _check_disturbed_cpu(self) -> None:
        """The foreign CPU is summed over processes in % of one core (metrics._foreign_processes), so it is
        at most 100 x the logical cores; a threshold at or above that can never be crossed and would turn
        interference detection off without a word."""
        if not _finite_positive(self.disturbed_cpu):
            raise UserError(f"--disturbed-cpu must be > 0 (% of one core), got {self.disturbed_cpu:g}")
        cores = psutil.cpu_count(logical=True) or 1
        if self.disturbed_cpu >= 100 * cores:
            raise UserError(
                f"--disturbed-cpu {self.disturbed_cpu:g}: foreign CPU is % of one core summed over "
                f"processes, at most {100 * cores}% on this machine's {cores} logical cores; give "
                f"less than {100 * cores}")


@dataclass
class MixedLoad:
    """The mixed scenario's writes among its checks and, given a rate, its open loop (phase_plan.py)."""

    write_share: float = 0.01
    write_kind: str = "acl"  # acl | membership | hierarchy | org_admin | realistic (workloads/writes.py)
    rate: float | None = None  # open loop at this rate instead of closed loop
    rates: list[float] = field(default_factory=list)  # one open-loop phase per rate (SLO per rate)
    stages: list[tuple[float, float]] = field(default_factory=list)
    duration_s: float = 10.0  # open loop duration when no stages are given

    def validate(self) -> None:
        if not 0 <= self.write_share <= 1:
            raise UserError(f"--write-share must be between 0 and 1, got {self.write_share}")
        if self.write_kind not in MIXED_KINDS:
            raise UserError(f"--write-kind must be one of {', '.join(MIXED_KINDS)}, got {self.write_kind!r}")
        if self.rate is not None and not _finite_positive(self.rate):
            raise UserError(f"--rate must be > 0 ops/s, got {self.rate:g}")
        if not _finite_positive(self.duration_s):
            raise UserError(f"--duration must be > 0 s, got {self.duration_s:g}")
        for r in self.rates:
            if not _finite_positive(r):
                raise UserError(f"--rates: every rate must be > 0 ops/s, got {r:g}")
        for r, secs in self.stages:
            if not (0 <= r < math.inf and _finite_positive(secs)):
                raise UserError(f"--stage {r:g}:{secs:g}: the rate must be >= 0 and the seconds > 0")

    def check_fits(self, workers: int) -> None:
        """Each of `workers` holds an open-loop phase's whole schedule: refuse one that cannot fit here."""
        steps = [("--rates", [(r, self.duration_s)]) for r in self.rates]
        if not steps and self.stages:
            steps = [("--stage", self.stages)]
        elif not steps and self.rate:
            steps = [("--rate", [(self.rate, self.duration_s)])]
        for opt, stages in steps:
            ops = sum(max(r, self.rate or 0) * secs for r, secs in stages)  # an upper bound of the ramps' ops
            if ops > (limit := max_scheduled_ops(workers)):
                raise UserError(f"{opt}: {ops:,.0f} ops scheduled in one phase, at most {limit:,} fit here "
                                f"(every worker holds the phase's schedule, 8 bytes per op, in memory)")


@dataclass
class Churn:
    """The churn sweep (workloads/churn.py): per backend one open-loop step per rate of structural changes,
    each with checks at `read_rate`; recorded in the manifest as config.churn."""

    # changes/s, one step each, ascending
    rates: list[float] = field(default_factory=lambda: list(CHURN_RATES))
    read_rate: float = CHURN_READ_RATE  # checks/s over the reader workers, every step
    step_s: float = CHURN_STEP_S  # seconds a step schedules changes and checks for
    writers: int = 2  # worker processes issuing the changes
    freshness_s: float = CHURN_FRESHNESS_S  # a change visible within this is fresh (the step's bound)
    mix: list[tuple[str, float]] | None = None  # (kind, share); None: churn.py's CHURN_MIX (decide: its own)

    def validate(self) -> None:
        if not self.rates or any(not _finite_positive(r) for r in self.rates):
            raise UserError(f"--churn-rates: every rate must be > 0 changes/s, got {self.rates}")
        if list(self.rates) != sorted(set(self.rates)):
            raise UserError(
                f"--churn-rates must ascend without repeats (the sweep stops at the first step that "
                f"does not hold), got {','.join(f'{r:g}' for r in self.rates)}")
        for opt, v in (("--churn-read-rate", self.read_rate), ("--churn-step", self.step_s),
                       ("--churn-freshness", self.freshness_s)):
            if not _finite_positive(v):
                raise UserError(f"{opt} must be > 0, got {v:g}")
        if self.writers < 1:
            raise UserError(f"--churn-writers must be >= 1, got {self.writers}")


@dataclass
class Targets:
    """What the report judges the run against: nothing in the run reads them, the manifest records them."""

    slo: dict[str, float] = field(default_factory=dict)
    # the report's "Capacity at a target": the ops/s and relationships a reader plans for (both or neither)
    target_qps: float | None = None
    target_relationships: float | None = None

    def validate(self) -> None:
        for key, opt in (("check_p95_ms", "--slo-check-p95"), ("write_p95_ms", "--slo-write-p95")):
            v = self.slo.get(key)
            if v is not None and not _finite_positive(v):
                raise UserError(f"{opt} must be > 0 ms, got {v:g}")
        v = self.slo.get("success")
        if v is not None and not 0 < v <= 1:
            raise UserError(f"--slo-success is a ratio in (0, 1], got {v:g}")
        given = [x for x in (self.target_qps, self.target_relationships) if x is not None]
        if len(given) == 1:
            raise UserError("--target-qps and --target-relationships go together: give both, or neither")
        if any(not _finite_positive(x) for x in given):
            raise UserError(
                f"--target-qps and --target-relationships must be > 0, got {given[0]:g}, {given[1]:g}")


_PARTS = {"data": DatasetChoice, "servers": ServerChoice, "schedule": Schedule, "mixed": MixedLoad,
          "targets": Targets}


@dataclass
class BenchConfig:
    """The parts of one run, as the CLI builds them. Functions take the part they read; the drivers that
    validate or record the whole run (orchestrate.prepare / bench, sweep) take this."""

    data: DatasetChoice = field(default_factory=DatasetChoice)
    servers: ServerChoice = field(default_factory=ServerChoice)
    schedule: Schedule = field(default_factory=Schedule)
    mixed: MixedLoad = field(default_factory=MixedLoad)
    targets: Targets = field(default_factory=Targets)
    # recorded nested, as config.churn (not one of the flat _PARTS)
    churn: Churn = field(default_factory=Churn)

    @classmethod
    def of(cls, **options: Any) -> BenchConfig:
        """A config from flat option names, the manifest's keys (`backends=[...], profile="tiny",
        rounds=2`): each goes to the part that declares it; a name no part declares is a TypeError, as in a
        constructor."""
        given: dict[str, dict[str, Any]] = {part: {} for part in _PARTS}
        owner = {f.name: part for part, kind in _PARTS.items() for f in fields(kind)}
        churn = options.pop("churn", None)
        for name, value in options.items():
            if name not in owner:
                raise TypeError(f"BenchConfig.of: no part declares {name!r}")
            given[owner[name]][name] = value
        made = cls(**{part: kind(**given[part]) for part, kind in _PARTS.items()})
        if churn is not None:
            made.churn = churn if isinstance(churn, Churn) else Churn(**churn)
        return made

    def to_manifest(self) -> dict[str, Any]:
        """One flat dict of every option, as the manifest has always recorded it (the report reads its keys,
        committed runs included)."""
        flat = {k: v for part in _PARTS for k, v in asdict(getattr(self, part)).items()}
        flat["churn"] = asdict(self.churn)
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in flat.items()}

    def validate(self) -> None:
        """Every bad value is one UserError naming the option, before any dataset or server is touched: each
        part's own values, then what must hold between parts."""
        self.servers.validate()
        self.data.validate()
        self._validate_model()
        self.schedule.validate()
        self.mixed.validate()
        self._validate_across()
        self.targets.validate()
        self.churn.validate()

    def _validate_model(self) -> None:
        """Some chosen backend implements the model (the others are skipped: ServerChoice.unsupported), and
        every scenario is one of the model's."""
        model, backends = self.data.model, self.servers.backends
        if all(model not in entry(b).models for b in backends):
            raise UserError(f"--model {model}: {', '.join(backends)} "
                            f"{'does' if len(backends) == 1 else 'do'} not implement the {model!r} model; "
                            f"those that do: {', '.join(b for b in systems() if model in entry(b).models)}")
        if self.schedule.scenarios is None:
            self.schedule.scenarios = list(DEFAULT_SCENARIOS_BY_MODEL.get(model, []))
        for s in self.schedule.scenarios:
            if scenario(s).model != model:
                raise UserError(f"scenario {s!r} belongs to the {scenario(s).model} model, not {model}")

    def _validate_across(self) -> None:
        if self.mixed.write_kind != "acl" and self.data.model != "rebac":
            raise UserError(
                f"--write-kind {self.mixed.write_kind} needs --model rebac (the social model writes "
                "followers)")
        conc = self.schedule.concurrency
        if self.servers.provision == "native":
            for b in self.servers.backends:
                _check_worker_limit(b, max(conc))
        self.mixed.check_fits(max(conc))



def _check_worker_limit(name: str, workers: int) -> None:
    """A native server that takes one connection per worker (and one for the run's own queries: server info,
    the loaded-hash check) refuses more than its declared `worker_limit`: one line before anything starts."""
    limit = entry(name).worker_limit
    slots = int(load(limit)) if limit else workers
    if workers > slots:
        raise UserError(
            f"--concurrency {workers}: at most {slots} workers for {name}: the native server allows "
            f"max_connections={slots + 1}, one connection per worker and one for the run")


def options_class(name: str) -> type[BackendOptions] | None:
    """The backend's Options dataclass; None when it has no adapter or lacks its driver (it fails later,
    alone, with that one line)."""
    e = entry(name)
    if not e.adapter or missing_driver(name):
        return None
    return backend_class(name).Options


def own_options(cls: type[BackendOptions], options: dict[str, Any]) -> dict[str, Any]:
    """The options `cls` declares: the others belong to another chosen backend."""
    names = option_names(cls)
    return {k: v for k, v in options.items() if k in names}
