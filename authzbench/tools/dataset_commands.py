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
    if args.mapping and args.format not in system_readers():
        raise UserError(f"--mapping: {args.format} maps its rows itself; a mapping file is for "
                        f"{', '.join(system_readers())}")
    if out.exists() and not (out / MANIFEST).is_file():  # replacing it would delete what is there
        raise UserError(f"--out {out} exists and is not a dataset: name another")
    if args.format in system_readers():
        src, edges = _system_source(args)
    else:
        src = origin(args.format, Path(args.path))  # a missing source file is refused here, before reading
        edges = reader(args.format).edges(Path(args.path))
    ds = write_graph(edges, out, src, drop_unmapped=args.drop_unmapped, anonymize=args.anonymize)
    o = ds.manifest["origin"]
    drops = {**o.get("dropped_by_mapping", {}), **o["dropped"]}
    dropped = ", ".join(f"{n:,} {why}" for why, n in drops.items()) or "none"
    stdout.print(f"{ds.path}: {ds.total_relationships:,} relationships imported from {args.format}"
                 f"{' (anonymized)' if args.anonymize else ''}; dropped: {dropped}; "
                 f"repeats merged: {o['duplicates_merged']:,}; hash {ds.hash[:16]}")
    return 0



def system_readers() -> dict:
    """The graph readers the systems declare (format -> reader(source, mapper)): SpiceDB's, OpenFGA's."""
    from authzbench.systems import load, systems

    return {fmt: r for s in systems().values() if s.readers for fmt, r in load(s.readers).items()}


def _system_source(args: argparse.Namespace) -> tuple[dict, list]:
    """(origin, edges) of a system's export: a live server's URL or a file, through a mapping (the schema's
    own names without --mapping). The mapping's drops are counted before write_graph checks the rest."""
    import inspect

    from authzbench.imports.graph import file_digest
    from authzbench.imports.mapping import Mapper, default_mapping, load_mapping

    read = system_readers()[args.format]
    renames = getattr(inspect.getmodule(read), "mapping_renames", lambda: None)()
    mapping = load_mapping(args.mapping, renames) if args.mapping else default_mapping("rebac", renames)
    mapper = Mapper(mapping, args.drop_unmapped)
    source = str(args.path)
    is_file = Path(source).is_file()
    edges = with_group_orgs(list(read(source if not is_file else Path(source), mapper)))
    where = {Path(source).name: file_digest(Path(source))} if is_file else {"server": _no_secret(source)}
    return {"format": args.format, "describes": read.__doc__.splitlines()[0] if read.__doc__ else "",
            "mapping": mapping.describe(), "files": where, "dropped_by_mapping": dict(mapper.dropped),
            "group_org_inferred": sum(e.where.startswith(_INFERRED) for e in edges)}, edges


_INFERRED = "inferred:"


def with_group_orgs(edges: list) -> list:
    """The edges, plus a group_org row for every group the source gives none: a Zanzibar schema holds no
    group -> organization row (the model keeps it as metadata, authz=False, which no answer reads: the
    scenarios pick their inputs by it), so a group takes the organization most of its members belong to
    (ties: the smallest id), or, with no member in any, the first organization of the graph."""
    from collections import Counter, defaultdict

    from authzbench.imports.edges import Edge

    has = {e.obj for e in edges if e.relation == "group_org"}
    org_of_user: dict[str, list[str]] = defaultdict(list)
    for e in edges:
        if e.relation in ("org_member", "org_admin"):
            org_of_user[e.subj].append(e.obj)
    votes: dict[str, Counter] = defaultdict(Counter)
    groups: set[str] = set()
    for e in edges:
        if e.relation in ("group_member", "group_manager"):
            votes[e.obj].update(org_of_user.get(e.subj, []))
        if e.relation.startswith("group_"):
            groups.add(e.obj)
        if e.relation in ("group_child", "resource_manager_group", "resource_viewer_group"):
            groups.add(e.subj)
    orgs = sorted({o for os_ in org_of_user.values() for o in os_})
    extra = []
    for g in sorted(groups - has):
        ranked = sorted(votes[g].items(), key=lambda kv: (-kv[1], kv[0]))
        org = ranked[0][0] if ranked else (orgs[0] if orgs else None)
        if org is not None:
            extra.append(Edge("group_org", g, org, f"{_INFERRED} group {g}'s organization"))
    return edges + extra


def _no_secret(url: str) -> str:
    """A server URL as the manifest keeps it: without a preshared key or token."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}" if sep else url


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


def generate_command(args: argparse.Namespace, default_out: Path) -> int:
    """`authzbench generate`: a profile's dataset, or with --like a look-alike of a dataset."""
    from authzbench.generator import generate
    from authzbench.generator.profiles import parse_sets

    if args.like or args.scale:  # generate --like DATASET [--scale N]: imports/like.py
        from authzbench.imports.like import command

        text = command(args.like, args.scale, args.sets, args.out, args.data_dir, args.seed)
        stdout.print(text, markup=False, highlight=False, soft_wrap=True)
        return 0
    ds = generate(args.profile, args.out or default_out, seed=args.seed,
                  overrides=parse_sets(args.sets), model=args.model)
    stdout.print(f"{ds.path}: {ds.total_relationships:,} relationships in "
                 f"{ds.manifest['generation']['seconds']:.2f} s, hash {ds.hash[:16]}")
    return 0


def stats_command(args: argparse.Namespace, default_out: Path) -> int:
    """`authzbench stats`: the distribution table, the totals, the shape and the scenario anchors."""
    from authzbench.generator import generate
    from authzbench.generator.profiles import parse_sets
    from authzbench.schema.dataset import Dataset
    from authzbench.truth.social_oracle import oracle_for
    from authzbench.workloads.stats import anchors, distribution, sampled_inputs, totals_table

    if args.path:
        ds = Dataset.open(args.path)
    else:
        ds = generate(args.profile, default_out, seed=args.seed, overrides=parse_sets(args.sets),
                      model=args.model, force=False)
    oracle = oracle_for(ds)
    t = Table(title=f"Distribution characteristics — {ds.profile} ({ds.total_relationships:,} relationships)")
    for c in ("Relationship", "Mean", "Min", "Max", "Notes"):
        t.add_column(c, justify="right" if c in ("Mean", "Min", "Max") else "left")
    for r in distribution(ds, oracle):
        t.add_row(r["relationship"], f"{r['mean']:.2f}", str(r["min"]), str(r["max"]), r["notes"])
    stdout.print(t)
    if ds.model != "rebac":
        return 0
    stdout.print(totals_table(ds))
    print_shape(args, ds, oracle)
    for k, v in anchors(oracle).items():
        stdout.print(f"{k} = [bold]{v}[/bold]")
    for name, inputs in sampled_inputs(ds, oracle).items():
        stdout.print(f"{name}: " + ", ".join(f"{a}->{e}" for a, e in inputs))
    return 0


def add_import_arguments(im, _name, _path) -> None:
    """`import`'s options (cli.py gives its argument types)."""
    from authzbench.imports.readers import READERS

    im.add_argument("--format", required=True, choices=[*READERS, *system_readers()],
                    help="; ".join([*(f"{k}: {r.describes}" for k, r in READERS.items()), *(
                        f"{k}: {(r.__doc__ or '').split('.')[0]}" for k, r in system_readers().items())]))
    im.add_argument("--path", required=True, type=_name, help="the source (reference-csv: the dir of CSVs; "
                    "a file; a live server's URL)")  # a str: a URL's // must stay
    im.add_argument("--mapping", type=_path, help="a TOML file mapping the source's type#relation@subject "
                    "onto the model's relations (default: the suite's schema names)")
    im.add_argument("--out", required=True, type=_path, help="dataset name under the data dir (or a path)")
    im.add_argument("--data-dir", type=_path, help="where datasets live (default: ./data, $AUTHZBENCH_DATA)")
    im.add_argument("--drop-unmapped", action="store_true",
                    help="drop (and count) rows the model cannot hold instead of refusing the import")
    im.add_argument("--anonymize", action="store_true",
                    help="order ids by a keyed hash and keep no id map: nothing of the source's ids is "
                         "written")
