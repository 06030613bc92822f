"""What `authzbench import` does, and the shape part of `authzbench stats` (commands.py calls both)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.table import Table

from authzbench.core.console import console, stdout
from authzbench.core.errors import UserError


def check_writable(opt: str, path: Path) -> None:
    """A directory we will write: its first existing ancestor must be a writable directory."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise UserError(f"{opt}: cannot write {path}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"{opt}: cannot write {path}: {probe} is not writable")


def import_graph(args: argparse.Namespace) -> int:
    """Read, check and write: a refused input leaves nothing written (imports/graph.py)."""
    from authzbench.generator import default_data_dir
    from authzbench.imports.graph import write_graph
    from authzbench.imports.readers import origin, reader
    from authzbench.schema.dataset import MANIFEST

    out = args.out if len(args.out.parts) > 1 else (args.data_dir or default_data_dir()) / args.out
    check_writable("--out", out)
    if out.exists() and not (out / MANIFEST).is_file():  # replacing it would delete what is there
        raise UserError(f"--out {out} exists and is not a dataset: name another")
    src = origin(args.format, args.path)  # a missing source file is refused here, before reading
    ds = write_graph(reader(args.format).edges(args.path), out, src, drop_unmapped=args.drop_unmapped,
                     anonymize=args.anonymize)
    o = ds.manifest["origin"]
    dropped = ", ".join(f"{n:,} {why}" for why, n in o["dropped"].items()) or "none"
    stdout.print(f"{ds.path}: {ds.total_relationships:,} relationships imported from {args.format}"
                 f"{' (anonymized)' if args.anonymize else ''}; dropped: {dropped}; "
                 f"repeats merged: {o['duplicates_merged']:,}; hash {ds.hash[:16]}")
    return 0



def _rich_table(title: str, rows: list[dict]) -> Table:
    t = Table(title=title)
    for c in rows[0] if rows else []:
        t.add_column(c, justify="left" if isinstance(rows[0][c], str) else "right")
    for r in rows:
        t.add_row(*(f"{v:,.2f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v)
                    for v in r.values()))
    return t


def print_shape(args: argparse.Namespace, ds, oracle) -> None:
    """Each relation's degrees, the shape sweep's parameters against baseline's, the heaviest users/groups."""
    from authzbench.generator import obtain
    from authzbench.imports.graph import source_ids
    from authzbench.workloads.graph_shape import heaviest, relation_table, shape_against

    if origin := ds.manifest.get("origin"):
        stdout.print(f"origin: {origin_line(origin)}", markup=False)
    stdout.print(_rich_table("Degrees per relation (entities with at least one edge; nearest-rank "
                             "percentiles)", relation_table(ds)))
    base = obtain("rebac", "baseline", {}, getattr(args, "data_dir", None),
                  announce=lambda m: console.print(m, markup=False))  # the ratios' other side
    stdout.print(_rich_table("Shape parameters against baseline", shape_against(ds, base)))
    heavy, ids = heaviest(ds, oracle.count_by_user("view")), source_ids(ds)
    for kind, rows in heavy.items():
        key = kind[:-1]
        if ids:
            rows = [{**r, "source id": ids[key][r[key]]} for r in rows]
        stdout.print(_rich_table(f"Heaviest {kind}", rows))


def origin_line(o: dict) -> str:
    """An import's origin in one line: format, files, anonymized, what was dropped."""
    dropped = ", ".join(f"{n:,} {why}" for why, n in o.get("dropped", {}).items()) or "nothing"
    files = o.get("files", {})
    return (f"imported from {o['format']} ({len(files)} files: {', '.join(files)}), "
            f"{'anonymized' if o.get('anonymized') else 'ids kept in source_ids.json'}, dropped {dropped}")
