"""`authzbench` command line: generate, stats, prepare, bench, report, up, down, backends, perf.

Bad input is one line on stderr and exit code 2; results already written stay on disk.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from authzbench.errors import UserError

console = Console()
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _csv_ints(s: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None


def _stage(s: str) -> tuple[float, float]:
    try:
        rate, secs = s.split(":")
        return float(rate), float(secs)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--stage expects RATE:SECONDS, got {s!r}") from None


def _backends(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    out: list[str] = []
    for v in values:
        out += [x.strip() for x in v.split(",") if x.strip()]
    return out


def _dataset_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="baseline", help="tiny | baseline | large | xl (the reference's dataset x1, x10, x100) or "
                   "baseline-v1 | large-v1 | xl-v1 (the earlier shape) (default: baseline)")
    p.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE",
                   help="override a generator parameter, e.g. --set resources_per_org=5000 (repeatable)")
    p.add_argument("--seed", type=int, help="random seed (default: the profile's)")
    p.add_argument("--model", default="rebac", choices=["rebac", "social"], help="authorization model")
    p.add_argument("--data-dir", type=Path, help="where datasets live (default: ./data or $AUTHZBENCH_DATA)")


def _backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", action="append", metavar="NAME",
                   help="backend(s) to use, repeatable or comma-separated (default: the default set; "
                        "`authzbench backends` lists them)")
    p.add_argument("--provision", choices=["native", "compose", "external"],
                   help="how servers are obtained (default: native without a Docker engine)")
    p.add_argument("--consistency", choices=["minimize_latency", "fully_consistent", "at_least_as_fresh"],
                   help="SpiceDB read consistency for the measured phases (default minimize_latency)")
    p.add_argument("--reload", action="store_true", help="reload even if the same dataset is already loaded")
    p.add_argument("--ingest-variants", default="none", metavar="none|all|LABEL",
                   help="also measure a backend's other load paths (e.g. WriteRelationships), each by a full "
                        "reload before the default path (default: none)")
    p.add_argument("--max-load-minutes", type=float, default=30.0,
                   help="stop a load that cannot finish within this bound, reporting its rate and projected "
                        "time (default: 30)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="authzbench", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("generate", help="generate a dataset (Parquet + manifest)")
    _dataset_args(g)
    g.add_argument("--out", type=Path, help="output dir (default: DATA_DIR/<model>-<profile>-s<seed>)")

    s = sub.add_parser("stats", help="distribution table, scenario anchors and sampled inputs of a dataset")
    _dataset_args(s)
    s.add_argument("--path", type=Path, help="an existing dataset dir instead of a profile")

    for name, hlp in (("prepare", "generate, start and load the backends (servers keep running)"),
                      ("bench", "run the scenarios (prepares what is missing) and write the report")):
        p = sub.add_parser(name, help=hlp)
        _dataset_args(p)
        _backend_args(p)
        if name == "bench":
            p.add_argument("--scenario", action="append", help="scenario(s) to run (default: all read "
                           "scenarios, roundtrip and mixed)")
            p.add_argument("--concurrency", type=_csv_ints, default=[1, 8, 32], help="closed-loop sweep (1,8,32)")
            p.add_argument("--iterations-scale", type=float, default=1.0,
                           help="multiply each scenario's default iterations (e.g. 0.1 for a quick run)")
            p.add_argument("--repeat", type=int, default=1, help="repeat every phase N times (stability/CV)")
            p.add_argument("--write-share", type=float, default=0.01, help="mixed: share of writes (0.01)")
            p.add_argument("--rate", type=float, help="mixed: open loop at this many ops/s")
            p.add_argument("--stage", type=_stage, action="append", metavar="RATE:SECONDS",
                           help="mixed: open-loop ramp stage (repeatable), like k6 ramping-arrival-rate")
            p.add_argument("--rates", type=lambda s: [float(x) for x in s.split(",")],
                           help="mixed: one open-loop step per rate, e.g. 100,500,1000; the report names the "
                                "highest rate that met the SLO")
            p.add_argument("--duration", type=float, default=10.0, help="mixed open loop duration per step (s)")
            p.add_argument("--dau", type=float, default=0.05,
                           help="social: daily-active-user sampling factor (share of users issuing requests)")
            p.add_argument("--slo-check-p95", type=float, default=25.0, help="SLO: check p95 (ms)")
            p.add_argument("--slo-write-p95", type=float, default=100.0, help="SLO: write p95 (ms)")
            p.add_argument("--slo-success", type=float, default=0.999, help="SLO: success ratio")
            p.add_argument("--keep-running", action="store_true", help="leave servers started by bench running")
            p.add_argument("--profiles", help="size sweep: the same scenarios at each profile, e.g. "
                           "tiny,baseline,large; the last report shows how cost grows with size")
            p.add_argument("--scale", help="size sweep in multiples of the reference dataset: 1,10,100 "
                           "(= baseline,large,xl)")
            p.add_argument("--results-dir", type=Path, help="default ./results or $AUTHZBENCH_RESULTS")
            p.add_argument("--report-dir", type=Path, default=Path("reports"))
            p.add_argument("--no-report", action="store_true")

    r = sub.add_parser("report", help="render the markdown report of a run (default: the latest)")
    r.add_argument("run", nargs="?", type=Path, help="results/<run-id> (default: latest)")
    r.add_argument("--compare", nargs=2, type=Path, metavar=("RUN_A", "RUN_B"), help="ratio of every figure")
    r.add_argument("--results-dir", type=Path)
    r.add_argument("--out", type=Path, default=Path("reports"))

    for name, hlp in (("up", "start a backend's servers and leave them running"),
                      ("down", "stop servers started by prepare/up (default: all)")):
        p = sub.add_parser(name, help=hlp)
        p.add_argument("backend", nargs="*")
        p.add_argument("--provision", choices=["native", "compose", "external"])

    sub.add_parser("backends", help="list backends and whether each can run here")
    pf = sub.add_parser("perf", help="check the suite's own performance goals and print the figures")
    pf.add_argument("--quick", action="store_true", help="skip the xl generation run")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args) or 0
    except UserError as e:
        err.print(f"authzbench: error: {e}")
        return 2
    except KeyboardInterrupt:
        err.print("authzbench: interrupted; everything recorded so far is on disk")
        return 130


def _dispatch(args: argparse.Namespace) -> int | None:
    from authzbench.generator.profiles import parse_sets

    if args.cmd == "generate":
        from authzbench.generator import generate

        ds = generate(args.profile, args.out, seed=args.seed, overrides=parse_sets(args.sets), model=args.model)
        console.print(f"{ds.path}: {ds.total_relationships:,} relationships in "
                      f"{ds.manifest['generation']['seconds']:.2f} s, hash {ds.hash[:16]}")
        return 0
    if args.cmd == "stats":
        return _stats(args)
    if args.cmd in ("prepare", "bench"):
        return _prepare_or_bench(args)
    if args.cmd == "report":
        return _report(args)
    if args.cmd == "backends":
        return _list_backends()
    if args.cmd == "up":
        return _up(args)
    if args.cmd == "down":
        from authzbench import orchestrate

        names = args.backend or orchestrate.running()
        stopped = orchestrate.down(names)
        console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return 0
    if args.cmd == "perf":
        from authzbench.perf import run_perf

        return run_perf(quick=args.quick)
    return None


def _config(args: argparse.Namespace):
    from authzbench.generator.profiles import parse_sets
    from authzbench.orchestrate import BenchConfig, default_backends
    from authzbench.provision.manager import default_mode

    overrides = parse_sets(args.sets)
    if args.seed is not None:
        overrides["seed"] = str(args.seed)
    options = {}
    if getattr(args, "consistency", None):
        options["consistency"] = args.consistency
    cfg = BenchConfig(backends=_backends(args.backend) or default_backends(),
                      provision=args.provision or default_mode(), profile=args.profile, model=args.model,
                      overrides=overrides, options=options, reload=args.reload, data_dir=args.data_dir,
                      ingest_variants=args.ingest_variants, max_load_minutes=args.max_load_minutes)
    if args.cmd == "bench":
        if args.scenario:
            cfg.scenarios = args.scenario
        cfg.concurrency = args.concurrency
        cfg.iterations_scale = args.iterations_scale
        cfg.repeat = args.repeat
        cfg.write_share = args.write_share
        cfg.rate = args.rate
        cfg.stages = args.stage or []
        cfg.duration_s = args.duration
        cfg.rates = args.rates or []
        cfg.dau = args.dau
        cfg.slo = {"check_p95_ms": args.slo_check_p95, "write_p95_ms": args.slo_write_p95,
                   "success": args.slo_success}
        cfg.keep_running = args.keep_running
    cfg.validate()
    return cfg


def _prepare_or_bench(args: argparse.Namespace) -> int:
    from authzbench import orchestrate
    from authzbench.results import RunStore

    cfg = _config(args)
    if args.cmd == "prepare":
        failures = orchestrate.prepare(cfg)
    elif args.profiles or args.scale:
        from authzbench.sweep import parse_sizes, run_sweep

        sizes = parse_sizes(args.profiles, args.scale, cfg.model)
        failures = run_sweep(cfg, sizes, args.results_dir, None if args.no_report else _renderer(args.report_dir))
    else:
        store = RunStore.create(args.results_dir)
        err.print(f"results: {store.path}")
        try:
            failures = orchestrate.bench(cfg, store)
        finally:
            if not args.no_report:
                from authzbench.report import render

                path = render(store.path, args.report_dir)
                console.print(f"report: {path}")
    for f in failures:
        err.print(f"authzbench: error: {f}")
    return 2 if failures else 0


def _renderer(report_dir: Path):
    from authzbench.report import render

    return lambda run: render(run, report_dir)


def _report(args: argparse.Namespace) -> int:
    from authzbench.results import latest_run

    if args.compare:
        from authzbench.report.compare import render_compare

        path = render_compare(args.compare[0], args.compare[1], args.out)
    else:
        from authzbench.report import render

        path = render(args.run or latest_run(args.results_dir), args.out)
    console.print(f"report: {path}")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from authzbench.dataset import Dataset
    from authzbench.generator import generate
    from authzbench.generator.profiles import parse_sets
    from authzbench.generator.stats import anchors, distribution, sampled_inputs, totals_table
    from authzbench.social_oracle import oracle_for

    if args.path:
        ds = Dataset.open(args.path)
    else:
        ds = generate(args.profile, None, seed=args.seed, overrides=parse_sets(args.sets), model=args.model,
                      force=False)
    oracle = oracle_for(ds)
    t = Table(title=f"Distribution characteristics — {ds.profile} ({ds.total_relationships:,} relationships)")
    for c in ("Relationship", "Mean", "Min", "Max", "Notes"):
        t.add_column(c, justify="right" if c in ("Mean", "Min", "Max") else "left")
    for r in distribution(ds, oracle):
        t.add_row(r["relationship"], f"{r['mean']:.2f}", str(r["min"]), str(r["max"]), r["notes"])
    console.print(t)
    if ds.model != "rebac":
        return 0
    console.print(totals_table(ds))
    for k, v in anchors(oracle).items():
        console.print(f"{k} = [bold]{v}[/bold]")
    for name, inputs in sampled_inputs(ds, oracle).items():
        console.print(f"{name}: " + ", ".join(f"{a}->{e}" for a, e in inputs))
    return 0


def _list_backends() -> int:
    from authzbench.backends.registry import BACKENDS, implementation, load_symbol

    t = Table(title="backends")
    for c in ("name", "default", "native here", "compose services", "why not"):
        t.add_column(c)
    for name, e in BACKENDS.items():
        why = e.why_not_native
        ok = e.native is not None
        if ok:
            try:
                load_symbol(implementation(name))
            except UserError as ex:
                ok, why = False, str(ex)
            except AttributeError:
                ok, why = False, "not implemented yet"
        t.add_row(name, "yes" if e.default else "", "yes" if ok else "no", ", ".join(e.compose_services), why)
    console.print(t)
    return 0


def _up(args: argparse.Namespace) -> int:
    from authzbench.orchestrate import BenchConfig, Session
    from authzbench.provision.manager import default_mode

    if not args.backend:
        raise UserError("name the backend(s) to start, e.g. `authzbench up postgres`")
    for name in args.backend:
        cfg = BenchConfig(backends=[name], provision=args.provision or default_mode())
        cfg.validate()
        sess = Session(name, cfg)
        console.print(f"{name}: up ({sess.dep.mode}), endpoint {sess.dep.public_endpoint()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
