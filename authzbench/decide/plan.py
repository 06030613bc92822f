"""The plan of a decide run: stage 1 every backend at `baseline`, each later stage the survivors one profile
up (`large`, then `xl`) until a stage reaches the target's size; each stage's ETA; the plan fitted to the
budget by dropping the largest size first. Printed before anything is measured.

A stage's ETA per backend: its server start and load at the committed runs' rates (Priors), the inputs'
sampling at the committed size nearest below, and its phases' planned seconds (their budgets, as bench's own
estimate: run/progress.py) plus PRIOR_OVERHEAD_S a phase. A backend whose load at a size would pass the load
bound (run/loading.py LoadBound would stop it) or whose footprint would not fit the machine's memory is not
planned at that size, with the reason. The plan assumes every backend survives each stage: a pruned backend
makes the run shorter than planned, and the plan is printed again after each stage."""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from authzbench.core.errors import UserError
from authzbench.run.loading import LoadBound
from authzbench.run.progress import PRIOR_OVERHEAD_S

SIZES = ("baseline", "large", "xl")  # the profiles a decide run grows through, x1, x10, x100
# Where the committed example runs live (a clean clone has them): their ingest and step records are the
# plan's priors. A machine without them plans with PRIOR_RATE and no sampling time.
EXAMPLES = Path(__file__).resolve().parents[2] / "reports" / "data"
# Relationships/s a load is planned at without a committed figure: the slowest default load measured at
# baseline (2,075/s in 20261202-023427, in git history), so an unknown backend is planned long, not short.
PRIOR_RATE = 2_075.0
PRIOR_START_S = 10.0  # a server start without a committed figure (the slowest measured: 8.7 s at baseline)
# The default budget: about an hour on this machine kind (2 shared cores, 23 GiB): stage 1 of the nine
# default backends at baseline plans ~15 min and `large` ~35 min, so both fit and `xl` is dropped.
DEFAULT_BUDGET_MIN = 60.0
SPEED = "speed index"  # the machine-speed workload a run times before each backend's visit
DATASET = "dataset and oracle"  # the run's step that generates (or reads) the dataset and builds the oracle


@dataclass(frozen=True)
class Stage:
    profile: str
    relationships: int
    backends: list[str]
    eta_s: float
    per_backend_s: dict[str, float] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)  # backend -> why it is not planned at this size

    def as_json(self) -> dict:
        return {"profile": self.profile, "relationships": self.relationships, "backends": self.backends,
                "eta_s": round(self.eta_s, 1), "per_backend_s": {b: round(s, 1) for b, s in
                                                                 self.per_backend_s.items()},
                "left_out": self.left_out}


@dataclass(frozen=True)
class Plan:
    budget_s: float
    stages: list[Stage]
    dropped: list[str]

    @property
    def eta_s(self) -> float:
        return sum(s.eta_s for s in self.stages)

    def as_json(self) -> dict:
        return {"budget_s": self.budget_s, "eta_s": round(self.eta_s, 1),
                "stages": [s.as_json() for s in self.stages], "dropped": self.dropped}

    def lines(self) -> list[str]:
        out = [f"decide plan: {len(self.stages)} stage(s), ETA ~{self.eta_s / 60:.1f} min within a "
               f"{self.budget_s / 60:g} min budget (every backend assumed to survive each stage)"]
        for i, s in enumerate(self.stages, 1):
            out.append(f"  stage {i}: {s.profile} (~{s.relationships:,} relationships), "
                       f"{len(s.backends)} backend(s) {', '.join(s.backends)}: ~{s.eta_s / 60:.1f} min")
            out += [f"    {b} not planned at {s.profile}: {why}" for b, why in s.left_out.items()]
        out += [f"  dropped: {d}" for d in self.dropped]
        return out


@dataclass(frozen=True)
class Measured:
    """One committed run's figures at one size: per backend its start and load seconds and its footprint,
    and the sampling step of each scenario's inputs."""

    relationships: int
    start_s: dict[str, float]
    load_s: dict[str, float]
    footprint: dict[str, int]
    inputs_s: dict[str, float]


@dataclass(frozen=True)
class Priors:
    by_size: list[Measured]  # ascending by relationships

    def nearest(self, n: float, backend: str | None = None) -> Measured | None:
        """The committed size nearest below n (else the smallest) that measured `backend`'s load (any, when
        None): its rates carry to n."""
        have = [m for m in self.by_size if backend is None or backend in m.load_s]
        below = [m for m in have if m.relationships <= n * 1.01]
        return below[-1] if below else (have[0] if have else None)

    def load_s(self, backend: str, n: float) -> float:
        m = self.nearest(n, backend)
        return m.load_s[backend] * n / m.relationships if m else n / PRIOR_RATE

    def start_s(self, backend: str, n: float) -> float:
        m = self.nearest(n, backend)
        return (m.start_s.get(backend) if m else None) or PRIOR_START_S

    def footprint(self, backend: str, n: float) -> float:
        m = self.nearest(n, backend)
        f = m.footprint.get(backend) if m else None
        return f * n / m.relationships if f and m else 0.0

    def inputs_s(self, scenarios: list[str], n: float) -> float:
        m = self.nearest(n)
        return sum(m.inputs_s.get(s, 0.0) for s in [*scenarios, DATASET]) * n / m.relationships if m else 0.0


def read_priors(root: Path = EXAMPLES) -> Priors:
    """The newest committed rebac run per profile (by run id), read from its records."""
    newest: dict[str, Path] = {}
    for man in sorted(root.glob("*/manifest.json")) if root.is_dir() else []:
        try:
            cfg = json.loads(man.read_text()).get("config") or {}
        except ValueError:
            continue
        if cfg.get("model", "rebac") == "rebac" and cfg.get("profile") in SIZES and not cfg.get("overrides"):
            newest[cfg["profile"]] = man.parent
    sizes = [m for m in (_measured(p) for p in newest.values()) if m is not None]
    return Priors(sorted(sizes, key=lambda m: m.relationships))


def _measured(run: Path) -> Measured | None:
    start, load, foot, inputs, speed, n = {}, {}, {}, {}, {}, 0
    try:
        with gzip.open(run / "records.jsonl.gz", "rt") as f:
            for line in f:
                if '"ingest"' not in line and '"step"' not in line:
                    continue
                r = json.loads(line)
                if r.get("type") == "ingest" and not r.get("variant"):
                    n = max(n, int(r["relationships"]))
                    load[r["backend"]] = float(r["load_seconds"]) + float(r.get("build_seconds") or 0)
                    start[r["backend"]] = float(r.get("start_seconds") or 0) or PRIOR_START_S
                    foot[r["backend"]] = int(r.get("footprint_bytes") or 0)
                elif r.get("type") == "step" and str(r.get("step", "")).startswith("inputs and expected"):
                    inputs[r["step"].rsplit(" ", 1)[-1]] = float(r["seconds"])
                elif r.get("type") == "step" and r.get("step") == DATASET and not r.get("backend"):
                    inputs[DATASET] = float(r["seconds"])
                elif r.get("type") == "step" and r.get("step") == SPEED and r.get("backend"):
                    # before every visit (~6 s each): a stage has one visit, so the first one counts
                    speed.setdefault(r["backend"], float(r["seconds"]))
    except OSError:
        return None
    start = {b: v + speed.get(b, 0.0) for b, v in start.items()}  # a server start follows its speed index
    return Measured(n, start, load, foot, inputs) if n else None


def memory_bytes() -> tuple[int, int]:
    """(available, total) bytes of this machine, as LoadBound reads them."""
    from authzbench.run.loading import _memory

    return _memory()


@dataclass(frozen=True)
class Sizing:
    """What a stage's ETA needs besides the priors: each backend's phases' planned seconds and count, the
    scenarios whose inputs are sampled, the load bound, and the machine's memory."""

    phases: Callable[[str], list[float]]
    scenarios: list[str]
    load_bound_s: float
    memory: tuple[int, int]


def stage(profile: str, n: int, backends: list[str], priors: Priors, sz: Sizing) -> Stage:
    """One stage's ETA, each backend admitted only where its load fits the bound and its footprint the
    machine's memory (above LoadBound's floor)."""
    per, left = {}, {}
    avail, total = sz.memory
    for b in backends:
        load = priors.load_s(b, n)
        if profile != SIZES[0] and load > sz.load_bound_s:
            left[b] = (f"its load is planned at ~{load / 60:,.0f} min at the committed rate, past the "
                       f"{sz.load_bound_s / 60:g} min load bound")
            continue
        foot = priors.footprint(b, n)
        if profile != SIZES[0] and foot > avail - LoadBound.MEMORY_FLOOR * total:
            left[b] = (f"its footprint is planned at ~{foot / 2**30:,.1f} GiB, past the "
                       f"{(avail - LoadBound.MEMORY_FLOOR * total) / 2**30:,.1f} GiB this machine can give")
            continue
        ph = sz.phases(b)
        per[b] = priors.start_s(b, n) + load + sum(ph) + len(ph) * PRIOR_OVERHEAD_S
    eta = sum(per.values()) + (priors.inputs_s(sz.scenarios, n) if per else 0.0)
    return Stage(profile, n, list(per), eta, per, left)


def stages_to(target_n: float, sizes: dict[str, int]) -> list[str]:
    """The profiles from `baseline` up to the first that reaches the target's size (every one when none
    does)."""
    out = []
    for p in SIZES:
        out.append(p)
        if sizes[p] >= target_n:
            break
    return out


def fit(stages: list[Stage], budget_s: float) -> Plan:
    """Drop the largest size first until the plan fits the budget; stage 1 alone past it is refused."""
    kept, dropped = list(stages), []
    while len(kept) > 1 and sum(s.eta_s for s in kept) > budget_s:
        s = kept.pop()
        dropped.append(f"{s.profile} (~{s.relationships:,} relationships, ~{s.eta_s / 60:.1f} min): the plan "
                       f"with it is ~{(sum(x.eta_s for x in kept) + s.eta_s) / 60:.1f} min, past the "
                       f"{budget_s / 60:g} min budget")
    if kept and kept[0].eta_s > budget_s:
        first = kept[0]
        raise UserError(f"--budget {budget_s / 60:g}: stage 1 ({first.profile}, {len(first.backends)} "
                        f"backends) alone is planned at ~{first.eta_s / 60:.1f} min; give a larger budget or "
                        "fewer --backend")
    return Plan(budget_s, kept, dropped)


def make_plan(target_n: float, backends: list[str], sizes: dict[str, int], priors: Priors, sz: Sizing,
              budget_s: float) -> Plan:
    """Every stage planned with every backend (the survivors are not known yet), then fitted."""
    planned = [stage(p, sizes[p], backends, priors, sz) for p in stages_to(target_n, sizes)]
    return fit([s for s in planned if s.backends], budget_s)


def eta_text(s: float) -> str:
    return "?" if math.isnan(s) else f"{s / 60:.1f} min"
