"""`authzbench loadtest`'s driver: the dataset, the servers, one engine after another, each variant of
`workloads/loadtest.py` (the plans) run against it by `measure/k6.py` (the executor), every record stored.
The table is written by `report/loadtest.py`, called from commands.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from authzbench.core.records import Loadtest, as_dict
from authzbench.measure.k6 import run_plan
from authzbench.workloads.loadtest import PLANS, LoadTestPlan, plan_inputs


def run_command(
    backends: list[str], profile: str, variants: list[str], scale: float, threads: int,
    results_dir: Path | None = None, data_dir: Path | None = None) -> tuple[list[dict], list[str], str]:
    """`authzbench loadtest`: the social dataset of `profile`, loaded once per engine, each variant run
    against each engine in turn (one engine's servers up at a time); records under results/. Returns the
    records, the report's context lines and the run id (commands.py writes the table with report/loadtest.py).
    scale multiplies every arrival rate (1 = the document's)."""
    from authzbench.config import BenchConfig, DatasetChoice, ServerChoice
    from authzbench.results.store import RunStore
    from authzbench.run.dataset import dataset_of
    from authzbench.run.loading import load_backend
    from authzbench.run.servers import Session

    cfg = BenchConfig(data=DatasetChoice(model="social", profile=profile, data_dir=data_dir),
                      servers=ServerChoice(backends=backends))
    cfg.validate()
    ds = dataset_of(cfg.data)
    from authzbench.truth.social_oracle import oracle_for

    oracle = oracle_for(ds)
    n_content = ds.entities["content"]

    def expect(user: int, content: int) -> bool:  # an id past the dataset is content no one can see
        return content < n_content and oracle.check(user, "view_content", content)

    store = RunStore.create(results_dir, config={"via": "loadtest", "profile": profile, "backends": backends,
                                                 "variants": variants, "scale": scale, "threads": threads})
    records: list[dict] = []
    for name in backends:
        sess = Session(name, cfg.servers, cfg.data.model, reuse=False)
        try:
            load_backend(sess, ds, store, reload=False)
            records += _run_variants(sess, name, ds, store, (variants, scale, threads), expect)
        finally:
            sess.stop()
    return records, _context(profile, ds, scale, threads), store.run_id


def _run_variants(sess: Any, name: str, ds: Any, store: Any, how: tuple[list[str], float, int],
                  expect: Callable[[int, int], bool]) -> list[dict]:
    """Each variant against one loaded engine (how: variants, scale, threads); every record stored as it
    comes."""
    from dataclasses import asdict

    from authzbench.core.console import say

    variants, scale, threads = how
    n_users, n_content = ds.entities["user"], ds.entities["content"]
    # the in-process reference reads the dataset itself; others ignore it
    opened = {"dataset_path": str(ds.path)}
    with sess.backend(**opened) as b:
        info = b.server_info()
    records: list[dict] = []
    for v in variants:
        plan = PLANS[v].scaled(scale)
        plan = LoadTestPlan(**{**plan.__dict__, "threads": threads})
        inputs = plan_inputs(plan, n_users, n_content, expect, min(plan.scheduled(), 200_000))

        def connect(sess=sess):
            b = sess.backend(**opened)
            b.connect()
            return b

        say(f"{name}: load test `{v}` ({plan.scheduled():,} iterations due over "
            f"{sum(s for _, s in plan.stages):.0f} s, {plan.max_vus:,} VUs, think {plan.think_s:g} s)")
        res = run_plan(plan, connect, inputs)
        rec = Loadtest(backend=name, label=info.label, variant=v, plan=asdict(plan), dataset_hash=ds.hash,
                       **res.record())
        records.append(as_dict(store.append(rec)))
        say(f"{name} {v}: {res.iterations:,} requests, {res.dropped:,} dropped, {res.errors:,} errors, "
            f"{res.mismatches:,} mismatches")
    return records


def _context(profile: str, ds: Any, scale: float, threads: int) -> list[str]:
    """The report's context lines: the dataset, the two variants, what is timed."""
    n_users, n_content = ds.entities["user"], ds.entities["content"]
    return [
        f"Dataset: social `{profile}` ({ds.total_relationships:,} relationships, {n_users:,} users, "
        f"{n_content:,} content; hash `{ds.hash[:16]}`), loaded identically into every engine. Arrival "
        f"rates x{scale:g} of the document's; {threads} client threads in one process on this 2-core "
        "machine, shared with the servers.",
        "Published variant: the document's script (`sleep(1)` per iteration, at most 1,000 VUs, ids "
        "uniform over 100,000 with 30% reuse). A VU is busy for a request plus one second, so 1,000 VUs "
        "finish at most ~1,000 iterations/s whatever the server does; ids past the dataset name users "
        "and content that do not exist.",
        "Corrected variant: no think time (a VU is busy only while its request is), ids drawn from the "
        "dataset's users and content (30% reuse kept).",
        "Request duration is timed from send (k6's http_req_duration); the last column is timed from the "
        "iteration's intended start (waiting for a client thread included), by the measurement every bench "
        "phase uses: every answer is compared with the oracle, and a failed request is counted, not timed."]
