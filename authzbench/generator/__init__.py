"""Dataset generation: profile -> Parquet files + manifest, atomically, byte-identical per (profile, seed).

The dataset is written to a sibling temp dir and renamed into place only when complete, so an
interrupted run never leaves a directory that looks like a finished dataset.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from authzbench.core.errors import UserError
from authzbench.generator import rebac, social
from authzbench.generator.profiles import PROFILES, RebacParams, resolve
from authzbench.schema.dataset import COMPLETE_MARK, MANIFEST, Dataset
from authzbench.schema.model import ACL_RELATIONS, relation_defs

__all__ = ["PROFILES", "generate", "generate_params", "obtain", "default_data_dir", "dataset_dir"]

_SCHEMA = pa.schema([("object", pa.int32()), ("subject", pa.int32())])


def default_data_dir() -> Path:
    return Path(os.environ.get("AUTHZBENCH_DATA", "data"))


def dataset_dir(
    data_dir: Path, model: str, profile: str, seed: int, overrides: dict[str, str] | None) -> Path:
    """Default location: one folder per (model, profile, seed, overrides) so datasets never collide."""
    name = f"{model}-{profile}-s{seed}"
    if overrides:
        name += "-" + hashlib.sha256(json.dumps(sorted(overrides.items())).encode()).hexdigest()[:8]
    return data_dir / name


class _Writer:
    """Streams each relation to its Parquet file chunk by chunk (bounded memory for xl)."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.counts: dict[str, int] = {}

    def emit(self, relation: str, objects: np.ndarray, subjects: np.ndarray) -> None:
        w = self.writers.get(relation)
        if w is None:
            # No statistics timestamp or writer-dependent metadata: output is byte-identical per seed.
            w = pq.ParquetWriter(self.tmp / f"{relation}.parquet", _SCHEMA, compression="zstd",
                                 write_statistics=True)
            self.writers[relation] = w
            self.counts[relation] = 0
        table = pa.Table.from_arrays([pa.array(objects, pa.int32()), pa.array(subjects, pa.int32())],
                                     schema=_SCHEMA)
        w.write_table(table, row_group_size=1 << 20)
        self.counts[relation] += len(objects)

    def close(self) -> None:
        for w in self.writers.values():
            w.close()


def generate(profile: str, out_dir: str | Path | None = None, *, seed: int | None = None,
             overrides: dict[str, str] | None = None, model: str = "rebac", force: bool = True) -> Dataset:
    relation_defs(model)  # unknown model -> UserError
    overrides = dict(overrides or {})
    if seed is not None:
        overrides["seed"] = str(seed)
    params = resolve(profile, overrides, model)
    out = Path(out_dir) if out_dir else dataset_dir(default_data_dir(), model, profile, params.seed,
                                                    {k: v for k, v in overrides.items() if k != "seed"})
    if not force and (ds := reusable(out, params)) is not None:
        return ds
    gen = social if model == "social" else rebac
    return _write_atomically(out, profile, model, params, gen.entities(params),
                             lambda emit: gen.generate(params, emit))


def generate_params(params: RebacParams, out_dir: str | Path, label: str) -> Dataset:
    """A rebac dataset of exactly `params` (no profile): `generate --like`'s fitted look-alike; `label` is the
    manifest's profile."""
    params.validate()
    return _write_atomically(Path(out_dir), label, "rebac", params, rebac.entities(params),
                             lambda emit: rebac.generate(params, emit))


def obtain(model: str, profile: str, overrides: dict[str, str], data_dir: Path | None = None,
           announce: Callable[[str], None] | None = None) -> Dataset:
    """The dataset a run asks for: the one at its default place under data_dir (default_data_dir() when
    None) when it is complete and was made with the same parameters, else generated there (announced)."""
    params = resolve(profile, overrides, model)
    path = dataset_dir(data_dir or default_data_dir(), model, profile, params.seed,
                       {k: v for k, v in overrides.items() if k != "seed"})
    if (ds := reusable(path, params)) is not None:
        return ds
    if announce:
        announce(f"generating dataset {model}/{profile} -> {path}")
    return generate(profile, path, overrides=overrides, model=model)


def reusable(out: Path, params) -> Dataset | None:
    """The complete dataset at `out` if it was made with exactly `params`: one made with other
    parameters (an older generator default, say) must be made again, not silently reused."""
    if not (out / COMPLETE_MARK).is_file():
        return None
    ds = Dataset.open(out)
    return ds if ds.manifest.get("params") == params.as_dict() else None


def write_tables(out_dir: str | Path, tables: dict[str, tuple[list[int], list[int]]],
                 entities: dict[str, int], model: str = "rebac") -> Dataset:
    """A dataset from hand-written (objects, subjects) lists: for tests with worked-out answers."""

    def emit_all(emit) -> None:
        for rel in relation_defs(model):
            objs, subs = tables.get(rel, ([], []))
            key = np.array(objs, np.int64) * (max(subs, default=0) + 1) + np.array(subs, np.int64)
            order = np.argsort(key, kind="stable")
            emit(rel, np.array(objs, np.int32)[order], np.array(subs, np.int32)[order])

    params = RebacParams(seed=0) if model == "rebac" else resolve("tiny", {"seed": "0"}, model)
    return _write_atomically(Path(out_dir), "custom", model, params, entities, emit_all)


def _write_atomically(out: Path, profile: str, model: str, params, entities: dict[str, int],
                      produce, *, extra: dict | None = None, extra_files: dict[str, bytes] | None = None
                      ) -> Dataset:
    """`extra`: more manifest keys (an import's origin); `extra_files`: more files beside the tables (an
    import's id map), hashed into the manifest's extra_files_sha256 but not into the content hash."""
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    except OSError as e:
        raise UserError(f"cannot write dataset under {out.parent}: {e.strerror}") from None
    try:
        t0 = time.perf_counter()
        writer = _Writer(tmp)
        try:
            produce(writer.emit)
        finally:
            writer.close()
        seconds = time.perf_counter() - t0
        manifest = _manifest(profile, model, params, entities, writer.counts, tmp, seconds)
        for name, data in (extra_files or {}).items():
            (tmp / name).write_bytes(data)
            manifest.setdefault("extra_files_sha256", {})[name] = hashlib.sha256(data).hexdigest()
        manifest.update(extra or {})
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        (tmp / COMPLETE_MARK).write_text(manifest["content_hash"] + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"cannot write dataset to {out}: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Dataset.open(out)


def _manifest(profile: str, model: str, params, entities: dict[str, int],
              counts: dict[str, int], tmp: Path, seconds: float) -> dict:
    files = {}
    for rel in sorted(counts):
        h = hashlib.sha256()
        with open(tmp / f"{rel}.parquet", "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        files[rel] = h.hexdigest()
    content = hashlib.sha256("".join(f"{r}:{files[r]}\n" for r in sorted(files)).encode()).hexdigest()
    defs = relation_defs(model)
    ordered = {r: counts[r] for r in defs if r in counts}
    authz = sum(n for r, n in ordered.items() if defs[r].authz)
    return {
        "format": 1,
        "model": model,
        "profile": profile,
        "seed": params.seed,
        "params": params.as_dict(),
        "entities": entities,
        "counts": ordered,
        "relationships": authz,
        "acl_relations": list(ACL_RELATIONS) if model == "rebac" else [],
        "files_sha256": files,
        "content_hash": content,
        # Kept out of the hash: timing varies run to run, the data does not.
        "generation": {"seconds": round(seconds, 3)},
    }
