"""The reference suite's own dataset, made again by its own generator with the seed of its report, and
imported: `python -m authzbench.tools.reference_dataset [--source CLONE]`.

The reference (ifundeasy/test-rlp) regenerates its CSVs from RLP_RANDOM_SEED; its prepare log
(benchmark/1-prepare.log) prints the seed its report's data came from. Its generator is one stdlib-only
package (cmd/csv) of a module whose main imports every database driver, so only that package is built, with
a two-line main that calls it: nothing of the other drivers is downloaded. The CSVs are written under
~/.cache/authzbench/reference-dataset/data/ and checked against the report's 364,983 ACL rows, then imported
with --drop-unmapped (its 4 manager_group nestings have no relation in the rebac model) as DATA_DIR/NAME.

--source: a clone of the repository, or a bare git dir (the newest commit is read); without it the
repository is cloned into the cache first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from authzbench.core.errors import UserError

REPO_URL = "https://github.com/ifundeasy/test-rlp"
SEED = "1764542099322404000"  # benchmark/1-prepare.log: "using random seed=1764542099322404000"
ACL_ROWS = 364_983  # the report's "resource_acl entries", and its prepare log's
CACHE = Path.home() / ".cache" / "authzbench" / "reference-dataset"
_PARTS = ("go.mod", "go.sum", "cmd/csv")
_MAIN = 'package main\n\nimport "test-tls/cmd/csv"\n\nfunc main() { csv.CsvCreateData() }\n'


def _run(cmd: list[str], cwd: Path, env: dict | None = None) -> None:
    r = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise UserError(f"{' '.join(cmd[:3])} failed in {cwd}: {tail[0][:300]}")


def _source_tree(source: Path | None, build: Path) -> None:
    """The generator's package and its module files, copied into `build`."""
    if source is None:
        source = CACHE / "test-rlp"
        if not source.exists():
            _run(["git", "clone", "--depth", "1", REPO_URL, str(source)], CACHE)
    if (source / "cmd" / "csv").is_dir():
        for part in _PARTS:
            src, dst = source / part, build / part
            dst.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
        return
    if not (source / "HEAD").is_file():
        raise UserError(f"--source {source}: neither a clone of {REPO_URL} nor a bare git dir of it")
    with tempfile.NamedTemporaryFile(suffix=".tar") as tar:
        _run(["git", f"--git-dir={source}", "archive", "-o", tar.name, "HEAD", *_PARTS], build)
        with tarfile.open(tar.name) as t:
            t.extractall(build, filter="data")


def regenerate(source: Path | None) -> Path:
    """Build the generator and run it with the report's seed; the dir of the eight CSV files."""
    CACHE.mkdir(parents=True, exist_ok=True)
    build = CACHE / "build"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir()
    _source_tree(source, build)
    (build / "cmd" / "authzbench_gen").mkdir(parents=True)
    (build / "cmd" / "authzbench_gen" / "main.go").write_text(_MAIN)
    # -mod=mod: its go.sum lacks the lines of the indirect modules a partial build resolves
    _run(["go", "build", "-o", str(CACHE / "generate"), "./cmd/authzbench_gen"], build,
         {"GOFLAGS": "-mod=mod"})
    shutil.rmtree(CACHE / "data", ignore_errors=True)
    _run([str(CACHE / "generate")], CACHE, {"RLP_RANDOM_SEED": SEED})  # writes ./data/*.csv
    with open(CACHE / "data" / "resource_acl.csv") as fh:
        rows = sum(1 for _ in fh) - 1  # less the header
    if rows != ACL_ROWS:
        raise UserError(
            f"the generator wrote {rows:,} ACL rows, not the report's {ACL_ROWS:,}: another version of it")
    return CACHE / "data"


def _import(data: Path, data_dir: Path | None, name: str):
    """The CSVs as DATA_DIR/name, its manager_group nestings dropped and counted (the model has no relation
    for them)."""
    from authzbench.generator import default_data_dir
    from authzbench.imports.graph import write_graph
    from authzbench.imports.readers import origin, reader

    return write_graph(reader("reference-csv").edges(data), (data_dir or default_data_dir()) / name,
                       origin("reference-csv", data), drop_unmapped=True, anonymize=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m authzbench.tools.reference_dataset", description=__doc__)
    ap.add_argument("--source", type=Path, help=f"a clone (or bare git dir) of {REPO_URL}")
    ap.add_argument("--out", default="reference-rlp", help="dataset name under the data dir")
    ap.add_argument("--data-dir", type=Path)
    args = ap.parse_args(argv)
    try:
        data = regenerate(args.source)
        print(f"{data}: {ACL_ROWS:,} ACL rows, seed {SEED}")
        ds = _import(data, args.data_dir, args.out)
    except UserError as e:
        print(f"reference_dataset: error: {e}", file=sys.stderr)
        return 2
    dropped = ", ".join(f"{n:,} {why}" for why, n in ds.manifest["origin"]["dropped"].items()) or "none"
    print(f"{ds.path}: {ds.total_relationships:,} relationships, dropped: {dropped}, hash {ds.hash[:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
