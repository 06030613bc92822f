"""The dataset a run measures against and its oracle: reused from its directory or generated there, recorded
in the run's manifest with the distribution table. Every driver gets its dataset here (orchestrate, loadtest,
the tools), so none reaches into another driver for it."""

from __future__ import annotations

import time

from authzbench.config import DatasetChoice
from authzbench.core import records as rec
from authzbench.core.console import say
from authzbench.generator import obtain
from authzbench.results.store import RunStore
from authzbench.schema.dataset import Dataset
from authzbench.truth.social_oracle import oracle_for


def dataset_of(choice: DatasetChoice) -> Dataset:
    """The chosen dataset: the one at --dataset, else reused from its directory or generated there
    (generator.obtain)."""
    if choice.path is not None:
        return choice.existing()
    return obtain(choice.model, choice.profile, choice.overrides, choice.data_dir, announce=say)


def dataset_and_oracle(choice: DatasetChoice, store: RunStore):
    """The dataset (generated or reused) and its oracle, both recorded with the distribution table."""
    ds = dataset_of(choice)
    say(f"dataset {ds.path} ({ds.total_relationships:,} relationships, hash {ds.hash[:12]})")
    store.update_manifest(
        dataset={"path": str(ds.path), "profile": ds.profile, "model": ds.model, "hash": ds.hash,
                 "counts": ds.counts, "entities": ds.entities, "params": ds.manifest.get("params"),
                 "relationships": ds.total_relationships,
                 **({"origin": ds.manifest["origin"]} if "origin" in ds.manifest else {})})
    t0 = time.perf_counter()
    oracle = oracle_for(ds)
    store.append(rec.Oracle(seconds=time.perf_counter() - t0))
    from authzbench.workloads.stats import anchors, distribution

    store.append(rec.Distribution(rows=distribution(ds, oracle),
                                  anchors=anchors(oracle) if ds.model == "rebac" else {"dau": choice.dau}))
    return ds, oracle
