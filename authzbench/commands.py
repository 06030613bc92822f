"""What each `authzbench` command does once its options are parsed (cli.py parses them): checks the output
directories, builds the run's BenchConfig, and calls the drivers (orchestrate, sweep, report, servers)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.table import Table

from authzbench.core.console import console, stdout
from authzbench.core.errors import UserError


def _flat(values: list[list[str]] | None) -> list[str] | None:
    """--backend a,b --backend c -> [a, b, c] (each value already split by its argparse type)."""
    return [x for v in values for x in v] if values else None


# Output directories of each command, checked before anything is generated or started.
OUTPUT_DIRS = {"generate": ("out", "data_dir"), "import": ("data_dir",), "stats": ("data_dir",),
               "prepare": ("data_dir",),
               "loadtest": ("data_dir", "results_dir", "report_dir"),
               "crosscheck": ("data_dir", "results_dir", "report_dir"),
               "bench": ("data_dir", "results_dir", "report_dir"), "report": ("out",), "basis": ("out",),
               "decide": ("data_dir", "results_dir", "report_dir")}


def _check_output_dirs(args: argparse.Namespace) -> None:
    """A directory we will write: its first existing ancestor must be a writable directory."""

    for dest in OUTPUT_DIRS.get(args.cmd, ()):
        path = getattr(args, dest, None)
        if path is not None:
            _check_writable("--" + dest.replace("_", "-"), path)


def _check_writable(opt: str, path: Path) -> None:
    from authzbench.tools.dataset_commands import check_writable

    check_writable(opt, path)


def _import(args: argparse.Namespace) -> int:
    from authzbench.tools.dataset_commands import import_graph

    return import_graph(args)


def _loadtest(args: argparse.Namespace) -> int:
    from authzbench.report import loadtest as report
    from authzbench.results.store import RunStore, default_results_dir
    from authzbench.run.loadtest import run_command
    from authzbench.workloads.loadtest import PLANS

    bad = [v for v in args.variant if v not in PLANS]
    if bad:
        raise UserError(f"--variant {', '.join(bad)}: valid: {', '.join(PLANS)}")
    _, context, run_id = run_command(args.backend, args.profile, args.variant, args.scale, args.threads,
                                     args.results_dir, args.data_dir)
    # The context lines go into the manifest and the report is rendered from the results alone, as an
    # example report re-renders it (tools/examples.py).
    run = (args.results_dir or default_results_dir()) / run_id
    RunStore.open(run).update_manifest(loadtest_context=context)
    path = report.render_run(run, args.report_dir)
    stdout.print(f"authzbench load test report: {path}")
    return 0


def _crosscheck(args: argparse.Namespace) -> int:
    """Every name checked before a server starts: the backends the tools speak to, the check scenarios."""
    from authzbench.tools.crosscheck import CHECK_SCENARIOS, Plan, backends, run_command
    from authzbench.tools.crosscheck_report import render_run

    if args.render:
        stdout.print(f"crosscheck report: {render_run(args.render, args.report_dir)}")
        return 0
    bad = [b for b in args.backend if b not in backends()]
    if bad:
        raise UserError(f"--backend {', '.join(bad)}: crosscheck speaks to {', '.join(backends())}")
    from authzbench.generator.profiles import resolve

    resolve(args.profile, {}, "rebac")  # an unknown profile is refused before anything is written
    scenarios = args.scenario or list(CHECK_SCENARIOS)
    bad = [s for s in scenarios if s not in CHECK_SCENARIOS]
    if bad:
        raise UserError(f"--scenario {', '.join(bad)}: valid: {', '.join(CHECK_SCENARIOS)}")
    plan = Plan(list(dict.fromkeys(args.backend)), scenarios, sorted(set(args.concurrency)), args.rounds,
                args.seconds, args.breakdown_calls, args.tier)
    path = run_command(plan, args.profile, args.provision, args.results_dir, args.report_dir, args.data_dir)
    stdout.print(f"crosscheck report: {path}")
    return 0


def dispatch(args: argparse.Namespace) -> int | None:
    _check_output_dirs(args)
    _local_images(args)
    if args.cmd in ("generate", "stats") and not getattr(args, "path", None):
        _dataset_params(args)  # an unknown profile or a bad --set is refused before anything is written
    if args.cmd == "loadtest":
        return _loadtest(args)
    if args.cmd == "crosscheck":
        return _crosscheck(args)
    if args.cmd == "generate":
        return _generate(args)
    if args.cmd in ("stats", "import"):
        return _stats(args) if args.cmd == "stats" else _import(args)
    if args.cmd in ("prepare", "bench"):
        return _prepare_or_bench(args)
    if args.cmd == "report":
        return _report(args)
    if args.cmd == "backends":
        return _list_backends()
    handlers = {"basis": _basis, "plan": _plan, "decide": _decide, "up": _up, "engine": _engine}
    if args.cmd in handlers:
        return handlers[args.cmd](args)
    if args.cmd == "down":
        from authzbench.backends.registry import entry
        from authzbench.run import servers

        for name in args.backend:
            entry(name)  # an unknown name is a typo, not "nothing was running"
        names = args.backend or servers.running()
        stopped = servers.down(names)
        stdout.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return 0
    if args.cmd == "load-host":
        from authzbench.measure.distributed import load_host

        try:
            return load_host(args.scheduler, args.host, args.name)
        except (RuntimeError, OSError) as e:  # the worker could not start or reach the scheduler
            raise UserError(
                f"load-host: cannot join {args.scheduler}: {str(e).splitlines()[0][:200]}") from None
    if args.cmd == "perf":
        from authzbench.run.perf import run_perf

        return run_perf(quick=args.quick)
    return None


def _dataset_params(args: argparse.Namespace):
    from authzbench.generator.profiles import parse_sets, resolve

    overrides = parse_sets(args.sets)
    if args.seed is not None:
        overrides["seed"] = str(args.seed)
    return resolve(args.profile, overrides, args.model), overrides


def _default_out(args: argparse.Namespace) -> Path | None:
    """Where `generate` / `stats` put a dataset when no --out is given: under --data-dir when given."""
    if args.data_dir is None:
        return None
    from authzbench.generator import dataset_dir

    params, overrides = _dataset_params(args)
    return dataset_dir(args.data_dir, args.model, args.profile, params.seed,
                       {k: v for k, v in overrides.items() if k != "seed"})


def _config(args: argparse.Namespace):
    """The run's parts from the command line, validated (bench reads every part; prepare the dataset and
    the servers, the others left at their defaults)."""
    from authzbench.config import BenchConfig, DatasetChoice, ServerChoice, default_backends
    from authzbench.generator.profiles import parse_sets
    from authzbench.provision.manager import default_mode

    overrides = parse_sets(args.sets)
    if args.seed is not None:
        overrides["seed"] = str(args.seed)
    data = DatasetChoice(model=args.model, profile=args.profile, overrides=overrides, data_dir=args.data_dir)
    if args.dataset is not None:
        data.path = args.dataset
        data.profile = data.existing().profile  # what the run records and the report names ("imported")
    cfg = BenchConfig(
        data=data,
        servers=ServerChoice(
            backends=_flat(args.backend) or default_backends(), provision=args.provision or default_mode(),
            tier=getattr(args, "tier", "cached"), options=_backend_options(args), reload=args.reload,
            ingest_variants=args.ingest_variants, max_load_minutes=args.max_load_minutes))
    if args.cmd == "bench":
        cfg.data.dau = args.dau
        cfg.servers.keep_running, cfg.servers.workers_on = args.keep_running, args.workers_on
        cfg.schedule, cfg.mixed, cfg.targets = _schedule(args), _mixed_load(args), _targets(args)
        cfg.churn = _churn(args)
    cfg.validate()
    return cfg


def _backend_options(args: argparse.Namespace) -> dict[str, str]:
    options: dict[str, str] = {}
    for kv in args.option:
        key, sep, value = kv.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--option {kv!r}: expected KEY=VALUE")
        options[key.strip()] = value.strip()
    if getattr(args, "consistency", None):
        options["consistency"] = args.consistency
    return options


# 1 and 8 workers by default: on 2 cores the 32-worker phases measured the run queue (their best throughput
# was within 10% of 8 workers' for 6 of 7 backends in 20261128-013743) and each cost 3-7 s of worker hand-off
# beyond its 2 s window (20261128-042657). An open loop keeps 32 workers: they carry its high rates.
DEFAULT_WORKERS, OPEN_LOOP_WORKERS = [1, 8], [1, 8, 32]


def _concurrency(args: argparse.Namespace) -> list[int]:
    if args.concurrency:
        return args.concurrency
    return OPEN_LOOP_WORKERS if args.rate or args.rates or args.stage else DEFAULT_WORKERS


def _schedule(args: argparse.Namespace):
    from authzbench.config import Schedule

    sched = Schedule(
        scenarios=_flat(args.scenario) if args.scenario else None, concurrency=_concurrency(args),
        write_concurrency=args.write_concurrency, iterations_scale=args.iterations_scale, repeat=args.repeat,
        rounds=args.rounds, max_reruns=args.max_reruns, pin=args.pin, full_curve=args.full_curve,
        # `--rounds 1` alone was refused: the default 2 visits need 2 rounds to spread over
        visits=args.visits if args.visits is not None else min(2, args.rounds * args.repeat))
    if args.disturbed_cpu is not None:
        sched.disturbed_cpu = args.disturbed_cpu
    return sched


def _mixed_load(args: argparse.Namespace):
    from authzbench.config import MixedLoad

    return MixedLoad(write_share=args.write_share, write_kind=args.write_kind, rate=args.rate,
                     rates=args.rates or [], stages=args.stage or [], duration_s=args.duration)


def _churn(args: argparse.Namespace):
    from authzbench.config import Churn

    return Churn(rates=args.churn_rates, read_rate=args.churn_read_rate, step_s=args.churn_step,
                 writers=args.churn_writers, freshness_s=args.churn_freshness)


def _targets(args: argparse.Namespace):
    from authzbench.config import Targets

    return Targets(slo={"check_p95_ms": args.slo_check_p95, "write_p95_ms": args.slo_write_p95,
                        "success": args.slo_success},
                   target_qps=args.target_qps, target_relationships=args.target_relationships)


def _prepare_or_bench(args: argparse.Namespace) -> int:
    from authzbench.results.store import RunStore
    from authzbench.run import orchestrate

    cfg = _config(args)
    sweeps = [getattr(args, k, None) for k in ("shape", "profiles", "scale", "extend_sweep")]
    if args.dataset is not None and any(v is not None for v in sweeps):
        raise UserError(f"--dataset {args.dataset}: sweeps (--shape, --profiles, --scale, --extend-sweep) "
                        "generate their datasets; leave them out")
    if args.cmd == "prepare":
        failures = orchestrate.prepare(cfg)
    elif args.shape:
        failures = _shape_sweep(args, cfg)
    elif args.extend_sweep is not None:
        from authzbench.run.sweep import extend_sweep

        if args.profiles is not None or args.scale is not None:
            raise UserError(
                "--extend-sweep adds one size (--profile) to a sweep: leave out --profiles and --scale")
        failures = extend_sweep(
            cfg, args.extend_sweep, None if args.no_report else _renderer(args.report_dir))
    elif args.profiles is not None or args.scale is not None:
        from authzbench.run.sweep import parse_sizes, run_sweep

        sizes = parse_sizes(args.profiles, args.scale, cfg.data.model)
        failures = run_sweep(
            cfg, sizes, args.results_dir, None if args.no_report else _renderer(args.report_dir))
    else:
        store = RunStore.create(args.results_dir)
        console.print(f"results: {store.path}")
        try:
            failures = orchestrate.bench(cfg, store)
        finally:
            if not args.no_report:
                from authzbench.core.stopping import polled
                from authzbench.report import render

                try:
                    with polled():  # a signal now must not cut the report short: it is the run's last step
                        path = render(store.path, args.report_dir, args.against_reference)
                    stdout.print(f"report: {path}")
                except OSError as e:  # the disk that filled up may hold the reports too
                    console.print(
                        f"authzbench: cannot write the report under {args.report_dir}: {e.strerror or e}; "
                        f"`authzbench report {store.path}` renders it later", markup=False)
    for f in failures:
        console.print(f"authzbench: error: {f}", markup=False)
    return 2 if failures else 0


def _shape_sweep(args: argparse.Namespace, cfg) -> list[str]:
    from authzbench.run.shape import parse_shapes, plan, run_shape

    if args.profiles is not None or args.scale is not None:
        raise UserError(
            "--shape sweeps the graph's shape at one size (--profile): leave out --profiles and --scale")
    points = plan(cfg, parse_shapes(args.shape))
    return run_shape(cfg, points, args.results_dir, None if args.no_report else _renderer(args.report_dir))


def _basis(args: argparse.Namespace) -> int:
    from authzbench.results.store import RunStore

    for run in args.run:  # every run checked before the first is read
        RunStore.open(run)
    from authzbench.report.core import basis

    for run in args.run:
        stdout.print(f"cost basis: {basis.write(run, args.out)}", markup=False, highlight=False)
    return 0


def _plan(args: argparse.Namespace) -> int:
    from authzbench.core.projection import Target

    if args.against_tiers and (args.qps or args.relationships):
        raise UserError(
            "--against-tiers takes each tier's rate and size: leave out --qps and --relationships")
    if not args.against_tiers and not (args.qps and args.relationships):
        raise UserError("--qps and --relationships are both needed (or --against-tiers)")
    target = Target(args.qps or 1.0, args.relationships or 1.0, args.write_share, args.lookup_share,
                    args.utilization)
    target.validate()
    from authzbench.report import capacity
    from authzbench.report.core import basis

    # every source refused or accepted before one is read
    checked = [basis.check(src) for src in args.results_dir]
    bases = basis.combine([basis.read(c) for c in checked])
    if args.backend:
        unknown = [b for b in args.backend if b not in bases]
        if unknown:
            raise UserError(
                f"--backend {unknown[0]}: not measured in the runs given; measured: {', '.join(bases)}")
        bases = {b: bases[b] for b in args.backend}
    text = capacity.tiers_markdown(bases, args.utilization) if args.against_tiers else \
        capacity.plan_text(bases, target)
    stdout.print(text, markup=False, highlight=False, soft_wrap=True)
    return 0


def _decide(args: argparse.Namespace) -> int:
    from authzbench.decide.command import run_decide

    return run_decide(args)


def _renderer(report_dir: Path):
    from authzbench.report import render

    return lambda run: render(run, report_dir)


def _report(args: argparse.Namespace) -> int:
    from authzbench.results.store import latest_run

    if args.compare:
        from authzbench.report.compare import render_compare

        path = render_compare(args.compare[0], args.compare[1], args.out)
        _print_compare(args.compare[0], args.compare[1])
    elif args.run and (args.run / "decide.json").is_file():  # a decide run: its decision report
        from authzbench.decide.report import render as render_decide

        path = render_decide(args.run / "decide.json", args.out)
    else:
        from authzbench.report import render

        path = render(args.run or latest_run(args.results_dir), args.out, args.against_reference)
    stdout.print(f"report: {path}")
    return 0


def _print_compare(a: Path, b: Path) -> None:
    from authzbench.report.compare import summary
    from authzbench.report.core.data import load_run

    s = summary(load_run(a), load_run(b))
    share = f"{s['headline_agree'] / s['headline']:.0%}" if s["headline"] else "n/a"
    stdout.print(f"verdicts of A: {s['verdicts']}, reversed by B: {s['reversed']}, not confirmed by B: "
                  f"{s['unconfirmed']}; p50/throughput/ingest figures within ±25%: {s['headline_agree']} of "
                  f"{s['headline']} ({share})", markup=False)
    if "speed_ratio" in s:
        norm = f"{s['headline_agree_norm'] / s['headline']:.0%}" if s["headline"] else "n/a"
        index = f"{s['speed_ratio']:.2f}" if s["speed_ratio"] else "not recorded in both runs"
        stdout.print(f"machine-speed index B/A: {index}; normalized (each backend by its own "
                      f"round trip, ingest by the CPU part), within ±25%: "
                      f"{s['headline_agree_norm']} of {s['headline']} ({norm}); median |ln B/A| "
                      f"{s['log_raw']:.3f} raw, {s['log_norm']:.3f} normalized", markup=False)
    else:
        stdout.print("machine-speed index: not recorded in both runs; ratios are raw", markup=False)


def _generate(args: argparse.Namespace) -> int:
    from authzbench.tools.dataset_commands import generate_command

    return generate_command(args, _default_out(args))


def _stats(args: argparse.Namespace) -> int:
    from authzbench.tools.dataset_commands import stats_command

    return stats_command(args, _default_out(args))


def _list_backends() -> int:
    from authzbench.backends.registry import implementation, load_symbol
    from authzbench.provision.manager import runs_natively
    from authzbench.systems import systems

    t = Table(title="backends")
    for c in ("name", "default", "native here", "compose services", "why not"):
        t.add_column(c)
    for name, e in systems().items():
        why = e.why_not_native
        ok = runs_natively(name)
        if ok:
            try:
                load_symbol(implementation(name))
            except UserError as ex:
                ok, why = False, str(ex)
            except AttributeError:
                ok, why = False, "not implemented yet"
        t.add_row(name, "yes" if e.default else "", "yes" if ok else "no", ", ".join(e.services), why)
    stdout.print(t)
    return 0


def _local_images(args: argparse.Namespace) -> None:
    """--local-images only means something to compose; it reaches compose.py through the environment
    (so `down` and the workers see it too)."""
    if not getattr(args, "local_images", False):
        return
    if args.provision != "compose":
        raise UserError("--local-images needs --provision compose (it swaps the compose file's images)")
    from authzbench.provision.compose import LOCAL_IMAGES_VAR

    os.environ[LOCAL_IMAGES_VAR] = "1"


def _engine(args: argparse.Namespace) -> int:
    from authzbench.provision import engine

    if args.action == "down":
        stdout.print(engine.stop_own())
        return 0
    e = engine.ensure_engine(start=args.action == "up")
    stdout.print(e.notes[0])
    return 0


def _up(args: argparse.Namespace) -> int:
    from authzbench.config import ServerChoice
    from authzbench.provision.manager import default_mode
    from authzbench.run.servers import Session

    if not args.backend:
        raise UserError("name the backend(s) to start, e.g. `authzbench up postgres`")
    # every name checked (NAME@VERSION served too) before the first server starts
    mode = args.provision or default_mode()
    ServerChoice(backends=list(args.backend), provision=mode, tier=args.tier).validate()
    for name in args.backend:
        servers = ServerChoice(backends=[name], provision=mode, tier=args.tier)
        servers.validate()
        # the model only reaches the adapters `up` never makes: the default one
        sess = Session(name, servers, "rebac")
        stdout.print(f"{name}: up ({sess.dep.mode}), endpoint {sess.dep.public_endpoint()}")
    return 0
