"""`generate --like DATASET [--scale N]`: a synthetic rebac graph shaped like a given one, N times its size.

The fit finds the generator's parameters (generator/profiles.py RebacParams) whose graph has, relation by
relation, the dataset's degree distributions: per object (members per group, viewers per resource) and per
subject (groups per user, resources per user), their mean and their tail (p99). It starts from the moments
(rows per entity, shares of groups managed and nested), then corrects each count parameter by the ratio of
what it wanted to what the generator made (ROUNDS times: deduplicated draws make fewer rows than drawn), and
picks the activity caps (the Pareto tails of users, groups and orgs) from CAPS by the p99 they give. Every
trial graph is generated in memory at the dataset's own size.

The look-alike is the fitted parameters with N times the organizations: the suite scales its profiles so
(large and xl are 10x and 100x baseline's orgs), so row counts grow N times and the degree distributions
keep their shape. `compare` states the fit's error: per relation, the rows against the original's x N, and
each degree distribution's mean and p99 against the original's.

Limits (shown by the error, never hidden): the generator draws whole numbers of managers and viewers per
resource and admins per org, and keeps each org's groups and resources equal in number.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from authzbench.core.errors import UserError
from authzbench.generator import rebac
from authzbench.generator.profiles import RebacParams
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import REBAC_RELATIONS

ROUNDS = 4  # ratio corrections of the count parameters; 4 brought every mean within 2% on the test's graph
CAPS = (0.0, 1.5, 2.0, 3.0, 4.0, 8.0, 16.0)  # activity caps tried (0 = uncapped Pareto)
Graph = dict[str, tuple[np.ndarray, np.ndarray]]  # relation -> (objects, subjects)


@dataclass(frozen=True)
class Shape:
    """A graph's sizes and, per relation and side, the degrees' (mean, p99, max) over every entity of the
    type (an entity without a row counts as 0)."""

    entities: dict[str, int]
    rows: dict[str, int]
    degrees: dict[tuple[str, str], tuple[float, float, float]]  # (relation, "object" | "subject") -> stats

    def mean(self, rel: str, side: str) -> float:
        return self.degrees.get((rel, side), (0.0, 0.0, 0.0))[0]

    def p99(self, rel: str, side: str) -> float:
        return self.degrees.get((rel, side), (0.0, 0.0, 0.0))[1]

    def max(self, rel: str, side: str) -> float:
        return self.degrees.get((rel, side), (0.0, 0.0, 0.0))[2]


def shape_of(graph: Graph, entities: dict[str, int]) -> Shape:
    degrees: dict[tuple[str, str], tuple[float, float, float]] = {}
    rows = {}
    for rel, (objs, subs) in graph.items():
        d = REBAC_RELATIONS[rel]
        if not d.authz:
            continue
        rows[rel] = len(objs)
        for side, ids, kind in (("object", objs, d.object_type), ("subject", subs, d.subject_type)):
            deg = np.bincount(np.asarray(ids, np.int64), minlength=entities.get(kind, 0))
            degrees[(rel, side)] = ((float(deg.mean()), float(np.percentile(deg, 99)), float(deg.max()))
                                    if len(deg) else (0.0, 0.0, 0.0))
    return Shape(dict(entities), rows, degrees)


def dataset_shape(ds: Dataset) -> Shape:
    if ds.model != "rebac":
        raise UserError(f"generate --like fits the rebac model's graph; {ds.path} is a {ds.model} dataset")
    graph = {r: (ds.table(r)["object"].to_numpy(), ds.table(r)["subject"].to_numpy()) for r in ds.relations()}
    return shape_of(graph, ds.entities)


def generated(p: RebacParams) -> Graph:
    """The generator's graph of `p`, in memory."""
    parts: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}

    def emit(rel: str, objs: np.ndarray, subs: np.ndarray) -> None:
        o, s = parts.setdefault(rel, ([], []))
        o.append(objs)
        s.append(subs)

    rebac.generate(p, emit)
    return {r: (np.concatenate(o), np.concatenate(s)) for r, (o, s) in parts.items()}


def shape_of_params(p: RebacParams) -> Shape:
    return shape_of(generated(p), rebac.entities(p))


# The fit ------------------------------------------------------------------------------------------------

# count parameter -> (relation, side) whose mean it sets
COUNTS = {"manager_users_per_res": ("resource_manager_user", "object"),
          "manager_groups_per_res": ("resource_manager_group", "object"),
          "viewer_users_per_res": ("resource_viewer_user", "object"),
          "viewer_groups_per_res": ("resource_viewer_group", "object"),
          "admins_per_org": ("org_admin", "object"),
          "groups_per_user": ("group_member", "subject"),
          "orgs_per_user": ("org_member", "subject"),
          "group_manager_share": ("group_manager", "object"),
          "child_group_share": ("group_child", "subject")}
INTEGERS = {"manager_users_per_res", "manager_groups_per_res", "viewer_users_per_res",
            "viewer_groups_per_res", "admins_per_org"}
# cap -> (values tried, the p99s it moves), fitted one after the other. The Pareto shape stays the
# profiles' 1.16: fitted first over (1.05 .. 3.0) on the test's graph it moved every weight at once (orgs,
# groups, users) and left group sizes' p99 30% off at 10x, where the caps alone leave them within 10%.
TAILS = {"org_weight_cap": (CAPS, (("org_member", "object"),)),
         "group_weight_cap": (CAPS, (("group_member", "object"), ("resource_viewer_group", "subject"),
                                     ("resource_manager_group", "subject"))),
         "acl_weight_cap": (CAPS, (("resource_viewer_user", "subject"), ("resource_manager_user", "subject"),
                                   ("group_manager", "subject")))}


@dataclass(frozen=True)
class Fit:
    params: RebacParams  # at the look-alike's size (the dataset's orgs x scale)
    shape: Shape  # what the generator makes of params: the look-alike's own shape


def fit(ds: Dataset, scale: int = 1, seed: int = 42) -> Fit:
    """The generator's parameters whose graph, at `scale` times the dataset's orgs, is shaped like `ds`
    (module docstring). Every trial is generated at that size: the generator's uncapped Pareto weights are not
    scale-free (a user's activity is its weight over the mean weight, and the mean of a heavy tail grows with
    the sample), so parameters fitted at the dataset's size made 17% fewer group memberships per user at 10x
    (a 12-org test graph)."""
    want = dataset_shape(ds)
    e = want.entities
    orgs, groups, resources, users = e["organization"], e["group"], e["resource"], e["user"]
    if min(orgs, groups, resources, users) < 1:
        raise UserError(f"{ds.path}: generate --like needs at least one org, user, group and resource")
    x = {name: max(want.mean(*at), 0.0) for name, at in COUNTS.items()}
    x["group_manager_share"] = x["group_manager_share"] / 2  # a managed group has 1-3 managers
    x["orgs_per_user"] = max(1.0, x["orgs_per_user"])
    x["groups_per_user"] = x["groups_per_user"] / x["orgs_per_user"]  # the generator's is per org joined
    base = dict(orgs=orgs * scale, groups_per_org=max(1, round(groups / orgs)),
                resources_per_org=max(1, round(resources / orgs)),
                max_orgs_per_user=max(1, int(want.max("org_member", "subject")),
                                      math.ceil(x["orgs_per_user"])),
                seed=seed, chunk_orgs=64)
    caps = {"org_weight_cap": 0.0, "group_weight_cap": 0.0, "acl_weight_cap": 8.0}

    def params() -> RebacParams:
        return _params(base, x, caps, users * scale)

    _correct(params, x, want, ROUNDS // 2)
    for cap, (tried, at) in TAILS.items():
        caps[cap] = min(tried, key=lambda c, cap=cap, at=at: _tail_error(
            shape_of_params(_params(base, x, {**caps, cap: c}, users * scale)), want, at))
    p = _correct(params, x, want, ROUNDS - ROUNDS // 2)
    return Fit(p, shape_of_params(p))


def _uncapped(cap: str) -> float:
    """The value meaning "no cap" (CAPS' 0): 0 for the group and org caps; acl_weight_cap must be > 0, so a
    huge one."""
    return 1e12 if cap == "acl_weight_cap" else 0.0


def _params(base: dict, x: dict[str, float], caps: dict[str, float], users: int) -> RebacParams:
    c = {k: (v or _uncapped(k)) for k, v in caps.items()}
    counts = {k: (max(0, round(v)) if k in INTEGERS else v) for k, v in x.items()}
    counts["groups_per_user"] = max(1.0, counts["groups_per_user"])
    counts["orgs_per_user"] = max(1.0, counts["orgs_per_user"])
    for share in ("group_manager_share", "child_group_share"):
        counts[share] = min(1.0, max(0.0, counts[share]))
    # users = round(orgs * users_per_org / orgs_per_user): users_per_org keeps the user count the dataset's
    upo = max(1, round(users * counts["orgs_per_user"] / base["orgs"]))
    p = RebacParams(**base, **counts, **c, users_per_org=upo)
    p.validate()
    return p


def _correct(params: Callable[[], RebacParams], x: dict[str, float], want: Shape, rounds: int) -> RebacParams:
    """Each count parameter times (wanted mean / generated mean), `rounds` times."""
    for _ in range(rounds):
        got = shape_of_params(params())
        for name, at in COUNTS.items():
            target, made = want.mean(*at), got.mean(*at)
            if made > 0 and target > 0:
                x[name] *= target / made
            elif target == 0:
                x[name] = 0.0
    return params()


def _tail_error(got: Shape, want: Shape, at: tuple[tuple[str, str], ...]) -> float:
    return sum(abs(got.p99(*a) - want.p99(*a)) / max(want.p99(*a), 1.0) for a in at)


# The look-alike and its error ------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    relation: str
    measure: str  # "rows", "per object", "per subject"
    stat: str  # "count", "mean", "p99"
    original: float
    target: float  # original x scale for counts, the original's for degrees
    result: float

    @property
    def error(self) -> float:
        if self.target == 0:
            return 0.0 if self.result == 0 else math.inf
        return (self.result - self.target) / self.target


def compare(original: Shape, result: Shape, scale: int) -> list[Row]:
    """The fit's error, relation by relation (module docstring)."""
    out: list[Row] = []
    for rel in original.rows:
        out.append(Row(rel, "rows", "count", original.rows[rel], original.rows[rel] * scale,
                       result.rows.get(rel, 0)))
        for side in ("object", "subject"):
            for stat, get in (("mean", Shape.mean), ("p99", Shape.p99)):
                o = get(original, rel, side)
                out.append(Row(rel, f"per {side}", stat, o, o, get(result, rel, side)))
    return out


def like(ds: Dataset, out: str | Path, scale: int = 1, seed: int = 42) -> tuple[Dataset, list[Row]]:
    """The look-alike of `ds` at `scale` times its size, written at `out`, and the fit's error."""
    if scale < 1:
        raise UserError(f"--scale must be 1 or more, got {scale}")
    from authzbench.generator import generate_params

    f = fit(ds, scale, seed)
    result = generate_params(f.params, out, f"like-{ds.profile}-x{scale}")
    return result, compare(dataset_shape(ds), dataset_shape(result), scale)


def render(rows: list[Row], scale: int) -> str:
    """The comparison as a plain text table (one line per relation, measure and statistic)."""
    head = f"{'relation':24} {'measure':12} {'stat':5} {'original':>10} {f'target (x{scale})':>13} " \
           f"{'result':>10} {'error':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.relation:24} {r.measure:12} {r.stat:5} {r.original:10,.2f} {r.target:13,.2f} "
                     f"{r.result:10,.2f} {r.error:+8.1%}")
    return "\n".join(lines)


def command(like_path: Path | None, scale: int | None, sets: list[str] | None, out: Path | None,
            data_dir: Path | None, seed: int | None) -> str:
    """`generate --like DATASET [--scale N]`: the look-alike written (at `out`, by default
    DATA_DIR/like-<name>-xN) and what the command prints: the fit's error table and the result's line."""
    from authzbench.generator import default_data_dir

    if like_path is None:
        raise UserError("--scale needs --like DATASET (a profile is scaled with --set orgs=N)")
    if sets:
        raise UserError("--set with --like: the look-alike's parameters are fitted to the dataset")
    original = Dataset.open(like_path)
    n = scale or 1
    ds, rows = like(original, out or (data_dir or default_data_dir()) / f"like-{original.path.name}-x{n}", n,
                    seed=42 if seed is None else seed)
    return (f"{render(rows, n)}\n{ds.path}: {ds.total_relationships:,} relationships, like {original.path} "
            f"x{n}, hash {ds.hash[:16]}")
