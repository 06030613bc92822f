"""`authzbench` command line: the parser of generate, stats, prepare, bench, report, up, down, basis, plan,
decide, backends, perf, load-host, loadtest, crosscheck, and main(); what each command does is in commands.py.

Bad input is one line on stderr and exit code 2; results already written stay on disk.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import threading
from pathlib import Path
from typing import NoReturn

from authzbench.commands import dispatch
from authzbench.core.console import console
from authzbench.core.errors import UserError
from authzbench.provision.tiers import engines
from authzbench.systems import systems

# --repeat multiplies every phase: 100 repeats of `make bench` (~40 min each here) is ~3 days already.
MAX_REPEAT = 100
MAX_ROUNDS = 20  # a round of a 4 s phase budget is 0.2 s at 20: shorter says nothing


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad option is one line on stderr (no usage block) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _number(kind: type, low: float | None = None, *, above: bool = False, high: float | None = None):
    """An argparse type: an int/float that is finite and within [low, high] (or > low when `above`)."""

    def parse(s: str):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, got {s!r}") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {s!r}")
        if low is not None and (v <= low if above else v < low):
            raise argparse.ArgumentTypeError(f"must be {'>' if above else '>='} {low:g}, got {s}")
        if high is not None and v > high:
            raise argparse.ArgumentTypeError(f"must be <= {high:g}, got {s}")
        return v

    parse.__name__ = kind.__name__
    return parse


def _csv(item):
    """An argparse type: comma-separated values, each parsed by `item`; empty items are refused."""

    def parse(s: str) -> list:
        parts = [x.strip() for x in s.split(",")]
        if not all(parts):  # "" or "a,,b": an item was left out
            raise argparse.ArgumentTypeError(f"expected comma-separated values, got {s!r}")
        return [item(x) for x in parts]

    return parse


def _csv_ints(s: str) -> list[int]:
    return _csv(_number(int, 1))(s)


def _stage(s: str) -> tuple[float, float]:
    rate, sep, secs = s.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expects RATE:SECONDS, got {s!r}")
    # A stage may ramp down to 0 ops/s (k6 allows it), but it must last some time.
    return _number(float, 0)(rate), _number(float, 0, above=True)(secs)


# --qps 1M, --relationships 100G: the sizes capacity questions come in (B = billion, as G).
_SUFFIX = {"k": 1e3, "m": 1e6, "g": 1e9, "b": 1e9}


def _amount(s: str) -> float:
    """A positive finite number, optionally with a k / M / G (or B) suffix."""
    mult = _SUFFIX.get(s.strip()[-1:].lower(), 1.0)
    return _number(float, 0, above=True)(s.strip()[:-1] if mult > 1 else s) * mult


def _name(s: str) -> str:
    if not s.strip():
        raise argparse.ArgumentTypeError("expected a name, got an empty string")
    return s


def _path(s: str) -> Path:
    if not s.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return Path(s)


def _dataset_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="baseline", type=_name,
                   help="tiny | baseline | large | xl (the reference's dataset x1, x10, x100) or "
                   "baseline-v1 | large-v1 | xl-v1 (the earlier shape) (default: baseline)")
    p.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE",
                   help="override a generator parameter, e.g. --set resources_per_org=5000 (repeatable)")
    p.add_argument("--seed", type=_number(int, 0), help="random seed (default: the profile's)")
    p.add_argument("--model", default="rebac", choices=["rebac", "social"], help="authorization model")
    p.add_argument("--data-dir", type=_path, help="where datasets live (default: ./data or $AUTHZBENCH_DATA)")


def _import_args(sub) -> None:
    from authzbench.tools.dataset_commands import add_import_arguments

    add_import_arguments(sub.add_parser(
        "import", help="read a graph someone else made into a dataset (Parquet + manifest)"), _name, _path)


def _backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", action="append", metavar="NAME", type=_csv(_name),
                   help="backend(s) to use, repeatable or comma-separated (default: the default set; "
                        "`authzbench backends` lists them)")
    p.add_argument("--provision", choices=["native", "compose", "external"],
                   help="how servers are obtained (default: native without a Docker engine)")
    p.add_argument("--local-images", action="store_true",
                   help="with --provision compose: images built here from the native builds instead of the "
                        "official ones (compose/local/local-images.yaml; for machines that cannot pull)")
    p.add_argument("--consistency", choices=["minimize_latency", "fully_consistent", "at_least_as_fresh"],
                   help="read consistency for the measured phases, for the engines whose options take it "
                        "(default minimize_latency)")
    _tier_arg(p)
    p.add_argument("--reload", action="store_true", help="reload even if the same dataset is already loaded")
    p.add_argument("--ingest-variants", default="none", metavar="none|all|LABEL",
                   help="also measure a backend's other load paths (e.g. WriteRelationships), each by a full "
                        "reload before the default path (default: none)")
    p.add_argument("--max-load-minutes", type=float, default=30.0,
                   help="stop a load that cannot finish within this bound, reporting its rate and projected "
                        "time (default: 30)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a backend option (repeatable), e.g. --option bulk_docs=500; each backend's Options "
                        "dataclass lists its keys, an unknown key is an error")


def _tier_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tier", choices=["cached", "strict"], default="cached",
                   help=f"how the engines ({', '.join(engines())}) run: cached (answer caches on, one 5 s "
                        "freshness window, the same pools) or strict (fully consistent reads, caches off) "
                        "(default: cached)")


def _scheduler(s: str) -> str:
    """A Dask scheduler address: tcp:// or tls://, a host and a port."""
    if not re.fullmatch(r"(tcp|tls)://[^\s/:]+(:\d{1,5})", s.strip()):
        raise argparse.ArgumentTypeError(f"expected a scheduler address like tcp://10.0.0.1:8786, got {s!r}")
    return s.strip()


def _word(s: str) -> str:
    if not s.strip() or any(c.isspace() for c in s.strip()):
        raise argparse.ArgumentTypeError(f"expected a name or address without spaces, got {s!r}")
    return s.strip()


def _rounds_args(p: argparse.ArgumentParser) -> None:
    """`bench`'s rounds, visits and re-runs, and which worker counts and cores its phases use."""
    # 2 rounds of 2 s, one a visit, not 3 of 1.33 s: in a study of round windows cut from 4 s rounds
    # (20261128-041734), SpiceDB's 8-worker check p50 spread 14.3x between rounds of 1 s, 10.0x of 2 s, 4.0x
    # of 4 s; a median user's lookups 1.7-2.1x, 1.4-1.6x, 1.2-1.6x; and every phase less is ~0.5 s less
    # hand-off.
    p.add_argument("--rounds", type=_number(int, 1, high=MAX_ROUNDS), default=2,
                   help="split every phase into N rounds, interleaved with the other phases (default 2); "
                        "a figure's interval is the spread between its rounds")
    p.add_argument("--visits", type=_number(int, 1, high=MAX_ROUNDS), default=None,
                   help="visit every backend N times, in order then in reverse, its rounds spread over the "
                        "visits; its servers stay up in between (default 2; 1 when there is one round)")
    p.add_argument("--max-reruns", type=_number(int, 0, high=10), default=2,
                   help="re-run a phase disturbed by other processes' CPU at most N times (default 2)")
    p.add_argument("--disturbed-cpu", type=_number(float, 0, above=True), default=None, metavar="PERCENT",
                   help="a phase is disturbed when other processes used more than PERCENT of one core "
                   "during it, on average (default 25; summed over cores, so below 100 x the logical cores)")
    p.add_argument(
        "--full-curve", action="store_true",
        help="run every check scenario at every --concurrency (default: the via-group check and mixed; "
        "the other checks at the fewest workers)")
    p.add_argument("--pin", action="store_true",
                   help="isolation: the server on the last core, the client on the others (native only)")


def _churn_args(p: argparse.ArgumentParser) -> None:
    """The churn sweep's options (config.Churn; defaults in workloads/churn.py)."""
    from authzbench.workloads.churn import CHURN_FRESHNESS_S, CHURN_RATES, CHURN_READ_RATE, CHURN_STEP_S

    p.add_argument("--churn-rates", type=_csv(_number(float, 0, above=True)), default=list(CHURN_RATES),
                   help=f"churn: structural changes/s, one step each, ascending (default "
                        f"{','.join(f'{r:g}' for r in CHURN_RATES)})")
    p.add_argument("--churn-read-rate", type=_number(float, 0, above=True), default=CHURN_READ_RATE,
                   help=f"churn: checks/s offered during every step (default {CHURN_READ_RATE:g})")
    p.add_argument("--churn-step", type=_number(float, 0, above=True), default=CHURN_STEP_S,
                   help=f"churn: seconds per step (default {CHURN_STEP_S:g})")
    p.add_argument(
        "--churn-writers", type=_number(int, 1), default=2, help="churn: writer workers (default 2)")
    p.add_argument(
        "--churn-freshness", type=_number(float, 0, above=True), default=CHURN_FRESHNESS_S,
        help=f"churn: a change visible within this many seconds is fresh (default {CHURN_FRESHNESS_S:g})")


def _slo_args(p: argparse.ArgumentParser) -> None:
    """bench's SLOs (a function of their own so that _bench_args stays within test_sizes' bound)."""
    p.add_argument("--slo-check-p95", type=_number(float, 0, above=True), default=25.0,
                   help="SLO: check p95 (ms)")
    p.add_argument("--slo-write-p95", type=_number(float, 0, above=True), default=100.0,
                   help="SLO: write p95 (ms)")
    p.add_argument("--slo-success", type=_number(float, 0, above=True, high=1), default=0.999,
                   help="SLO: success ratio")


def _bench_args(p: argparse.ArgumentParser) -> None:
    """The options only `bench` has: scenarios, load shape, SLOs, sweep, results, load hosts."""
    p.add_argument("--scenario", action="append", type=_csv(_name), help="scenario(s) to run, repeatable or "
                   "comma-separated (default: roundtrip, the read scenarios, mixed and the write side: "
                   "write_membership, write_hierarchy, revoke_then_check, and the churn sweep)")
    p.add_argument("--concurrency", type=_csv_ints, default=None,
                   help="closed-loop sweep (default 1,8; 1,8,32 with --rate, --rates or --stage, whose open "
                        "loop runs at the highest count)")
    p.add_argument("--write-concurrency", type=_csv_ints, default=[1],
                   help="worker counts of the structural write scenarios (default 1)")
    p.add_argument("--iterations-scale", type=_number(float, 0, above=True), default=1.0,
                   help="multiply each scenario's default iterations (e.g. 0.1 for a quick run)")
    p.add_argument("--repeat", type=_number(int, 1, high=MAX_REPEAT), default=1,
                   help="repeat every phase N times at its full budget (stability/CV)")
    _rounds_args(p)
    p.add_argument(
        "--write-share", type=_number(float, 0, high=1), default=0.01, help="mixed: share of writes (0.01)")
    p.add_argument("--write-kind", default="acl", choices=["acl", "membership", "hierarchy", "org_admin",
                                                            "realistic"],
                   help="mixed: the edge the writes change (realistic = 70%% acl, 25%% membership, "
                        "4%% hierarchy, 1%% org admin; default acl)")
    p.add_argument("--rate", type=_number(float, 0, above=True), help="mixed: open loop at this many ops/s")
    p.add_argument("--stage", type=_stage, action="append", metavar="RATE:SECONDS",
                   help="mixed: open-loop ramp stage (repeatable), like k6 ramping-arrival-rate")
    p.add_argument("--rates", type=_csv(_number(float, 0, above=True)),
                   help="mixed: one open-loop step per rate, e.g. 100,500,1000; the report names the "
                        "highest rate that met the SLO")
    p.add_argument("--duration", type=_number(float, 0, above=True), default=10.0,
                   help="mixed open loop duration per step (s)")
    p.add_argument("--dau", type=_number(float, 0, above=True, high=1), default=0.05,
                   help="social: daily-active-user sampling factor (share of users issuing requests)")
    _churn_args(p)
    _slo_args(p)
    p.add_argument("--keep-running", action="store_true", help="leave servers started by bench running")
    p.add_argument("--profiles", help="size sweep: the same scenarios at each profile, e.g. "
                   "tiny,baseline,large; the last report shows how cost grows with size")
    p.add_argument("--scale", help="size sweep in multiples of the reference dataset: 1,10,100 "
                   "(= baseline,large,xl)")
    p.add_argument("--extend-sweep", type=Path, metavar="RUN",
                   help="add this run (at --profile) to the size sweep whose last run is RUN, beside it: a "
                        "size cut short, or backends a size did not reach; its report covers every size")
    p.add_argument(
        "--shape", action="append", metavar="PARAM=V1,V2,V3",
        help="shape sweep at --profile: one run per value of a generator parameter, the others fixed; "
        "PARAM is depth (group nesting), fanout (groups a user joins an org) or acl (viewers a "
        "resource), 3+ values each (repeatable), or `all` for each at its default values")
    p.add_argument("--results-dir", type=_path, help="default ./results or $AUTHZBENCH_RESULTS")
    p.add_argument("--report-dir", type=_path, default=Path("reports"))
    p.add_argument("--no-report", action="store_true")
    p.add_argument("--against-reference", action=argparse.BooleanOptionalAction, default=None,
                   help="the reference report's figures beside ours (default: on for the rebac baseline)")
    p.add_argument("--target-qps", type=_amount, metavar="N",
                   help="the report projects the cores, memory and disk each backend needs for N ops/s "
                        "(with --target-relationships; k/M/G suffixes)")
    p.add_argument("--target-relationships", type=_amount, metavar="M",
                   help="... over M relationships (with --target-qps)")
    p.add_argument("--workers-on", metavar="tcp://SCHEDULER:8786", type=_scheduler,
                   help="spread every phase's workers over the load hosts of this Dask scheduler "
                        "(`authzbench load-host` on each; --provision external; extra [distributed])")


def _capacity_args(sub) -> None:
    """`basis` (a run's cost basis as a small file to commit) and `plan` (capacity at a target)."""
    b = sub.add_parser("basis", help="extract a run's cost basis (server CPU per op, RSS, disk) into a small "
                                     "JSON file that `plan` reads")
    b.add_argument("run", nargs="+", type=_path, help="results/<run-id> (one or more)")
    b.add_argument("--out", type=_path, default=Path("reports/basis"), help="default reports/basis")
    pl = sub.add_parser("plan", help="cores, memory and disk each backend needs for a target rate and size, "
                                     "projected from measured per-op costs")
    pl.add_argument(
        "results_dir", nargs="+", type=_path,
        help="results/<run-id> or a cost-basis file from `authzbench basis` (several: a size sweep)")
    pl.add_argument("--qps", type=_amount, metavar="N", help="target ops/s (k/M suffixes)")
    pl.add_argument(
        "--relationships", type=_amount, metavar="M", help="target relationships (k/M/G suffixes)")
    pl.add_argument(
        "--write-share", type=_number(float, 0, high=1), default=0.01, help="share of writes (0.01)")
    pl.add_argument(
        "--lookup-share", type=_number(float, 0, high=1), default=0.0, help="share of lookups (0)")
    pl.add_argument("--utilization", type=_number(float, 0, above=True, high=1), default=0.6,
                    help="share of each core a server may use; the rest is headroom (0.6)")
    pl.add_argument("--backend", type=_csv(_name), help="only these backends (default: every one measured)")
    pl.add_argument("--against-tiers", action="store_true",
                    help="instead of --qps/--relationships: the scale load test's tiers T1-T13, projected "
                         "beside their published vCPUs")


def _decide_args(sub) -> None:
    """`decide` (issue 66): the reader's target, stated once (its options: decide/args.py)."""
    from authzbench.decide.args import add_arguments

    d = sub.add_parser("decide", help="measure the backends at a target's size, rates and freshness, stage "
                                      "by stage, pruning those that fail a need")
    add_arguments(d, _amount, _number, _csv, _name, _path)


def _crosscheck_args(sub) -> None:
    """`crosscheck` (issue 47): the suite's check phases beside pgbench / ghz on the same server and
    inputs."""
    cc = sub.add_parser("crosscheck",
                        help="the suite's check phases beside independent load tools (pgbench for "
                        "postgres, ghz for the engines) on the same server and inputs; the "
                        "manifest records the commit and the load average at the start")
    checked = [n for n, s in systems().items() if s.crosscheck]
    cc.add_argument("--backend", type=_csv(_name), default=checked,
                    help=f"{', '.join(checked)}, comma-separated (default: all {len(checked)})")
    cc.add_argument(
        "--profile", default="baseline", type=_name, help="rebac dataset profile (default: baseline)")
    cc.add_argument("--scenario", type=_csv(_name),
                    help="check scenarios, comma-separated (default: the four check scenarios)")
    cc.add_argument("--concurrency", type=_csv_ints, default=[1, 8], help="workers / clients (default: 1,8)")
    cc.add_argument(
        "--rounds", type=_number(int, 1, high=MAX_ROUNDS), default=3,
        help="rounds: on every phase the tool and ours once a round, the tool first in even rounds "
        "and ours first in odd ones (an engine's cache then favours neither); each run of either "
        "side after the phase's same warm-up (default 3)")
    cc.add_argument(
        "--seconds", type=_number(int, 1, high=600), default=3,
        help="measured seconds of each run of either side (whole seconds: pgbench's -T; default 3)")
    cc.add_argument(
        "--breakdown-calls", type=_number(int, 0), default=2000,
        help="calls of the adapter and of the bare driver timed at 1 worker, per scenario (0: none)")
    cc.add_argument("--provision", choices=["native", "compose", "external"])
    _tier_arg(cc)
    cc.add_argument("--data-dir", type=_path)
    cc.add_argument("--results-dir", type=_path, help="records go to RESULTS/crosscheck/<run-id>")
    cc.add_argument("--report-dir", type=_path, default=Path("reports"))
    cc.add_argument(
        "--render", type=_path, nargs="+", metavar="RUN",
        help="only render the report of a recorded run (several: one report of all their records)")


def _server_args(sub) -> None:
    """The commands that manage servers and load hosts: up, down, engine, load-host."""
    for name, hlp in (("up", "start a backend's servers and leave them running"),
                      ("down", "stop servers started by prepare/up (default: all)")):
        p = sub.add_parser(name, help=hlp)
        p.add_argument("backend", nargs="*", type=_name)
        p.add_argument("--provision", choices=["native", "compose", "external"])
        p.add_argument(
            "--local-images", action="store_true", help="with --provision compose: locally built images")
        if name == "up":
            _tier_arg(p)

    en = sub.add_parser("engine",
                        help="a Docker engine and Compose v2 for --provision compose: find, or (as root) "
                        "install and start one; `down` stops only the dockerd authzbench started")
    en.add_argument("action", nargs="?", choices=["up", "down", "status"], default="status")

    lh = sub.add_parser("load-host", help="join a Dask scheduler as a load host for `bench --workers-on`")
    lh.add_argument("scheduler", metavar="tcp://SCHEDULER:8786", type=_scheduler)
    lh.add_argument(
        "--host", type=_word, help="address to listen on (default: the one that reaches the scheduler)")
    lh.add_argument("--name", type=_word, help="worker name shown by the scheduler")


def _loadtest_args(sub) -> None:
    """`authzbench loadtest`: an engine vendor's published k6 load test and a corrected variant."""
    lt = sub.add_parser("loadtest",
                        help="the published k6 load test of the first default engine (and a corrected "
                        "variant) against each engine on the same social dataset")
    engs = [s.name for s in sorted((s for s in systems().values() if s.loadtest), key=lambda s: s.loadtest)]
    lt.add_argument("--backend", type=_csv(_name), default=engs,
                    help=f"engines, comma-separated (default: {','.join(engs)})")
    lt.add_argument(
        "--profile", default="baseline", type=_name, help="social dataset profile (default: baseline)")
    lt.add_argument("--variant", type=_csv(_name), default=["published", "corrected"],
                    help="published | corrected, comma-separated (default: both)")
    lt.add_argument("--scale", type=_number(float, 0, above=True), default=1.0,
                    help="multiply every arrival rate of the document's ramp (default: 1)")
    lt.add_argument("--threads", type=_number(int, 1), default=32, help="client threads (default: 32)")
    lt.add_argument("--data-dir", type=_path)
    lt.add_argument("--results-dir", type=_path)
    lt.add_argument("--report-dir", type=_path, default=Path("reports"))


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="authzbench", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("generate", help="generate a dataset (Parquet + manifest)")
    _dataset_args(g)
    g.add_argument("--out", type=_path, help="output dir (default: DATA_DIR/<model>-<profile>-s<seed>)")
    g.add_argument("--like", type=_path, metavar="DATASET",
                   help="a look-alike of this rebac dataset (imported or generated): its distributions "
                        "fitted per relation, printed beside the result's with the fit's error")
    g.add_argument("--scale", type=_number(int, 1), help="with --like: N times its size (default 1)")

    s = sub.add_parser("stats", help="distribution table, scenario anchors and sampled inputs of a dataset")
    _dataset_args(s)
    s.add_argument("--path", type=_path, help="an existing dataset dir instead of a profile")

    _import_args(sub)

    for name, hlp in (("prepare", "generate, start and load the backends (servers keep running)"),
                      ("bench", "run the scenarios (prepares what is missing) and write the report")):
        p = sub.add_parser(name, help=hlp)
        _dataset_args(p)
        p.add_argument("--dataset", type=_path, metavar="PATH",
                       help="an existing dataset dir (`authzbench import` writes one) instead of --profile")
        _backend_args(p)
        if name == "bench":
            _bench_args(p)

    r = sub.add_parser("report", help="render the markdown report of a run (default: the latest)")
    r.add_argument("run", nargs="?", type=_path,
                   help="results/<run-id> (default: latest); a decide run's: its decision report")
    r.add_argument("--compare", nargs=2, type=_path, metavar=("RUN_A", "RUN_B"), help="ratio of every figure")
    r.add_argument("--results-dir", type=_path)
    r.add_argument("--out", type=_path, default=Path("reports"))
    r.add_argument("--against-reference", action=argparse.BooleanOptionalAction, default=None,
                   help="the reference report's figures beside ours (default: on for the rebac baseline)")

    _server_args(sub)
    _loadtest_args(sub)
    _crosscheck_args(sub)
    _capacity_args(sub)
    _decide_args(sub)
    sub.add_parser("backends", help="list backends and whether each can run here")
    pf = sub.add_parser("perf", help="check the suite's own performance goals and print the figures")
    pf.add_argument("--quick", action="store_true", help="skip the xl generation run")
    return ap


# List options whose items a run does once each. A repeated item would run a backend, scenario, worker count
# or rate twice, or (KEY=VALUE options) keep only the last value without a word: refused like a repeated
# --profiles (sweep.parse_sizes), before anything starts.
ONCE_EACH = {"backend": "--backend", "scenario": "--scenario", "concurrency": "--concurrency",
             "write_concurrency": "--write-concurrency", "rates": "--rates", "churn_rates": "--churn-rates",
             "sets": "--set", "option": "--option"}


def refuse_repeats(args: argparse.Namespace) -> None:
    """UserError naming the first item given twice to any ONCE_EACH option."""
    for dest, opt in ONCE_EACH.items():
        given = getattr(args, dest, None)
        if not isinstance(given, list):  # unset, or a single positional name (up/down)
            continue
        items = [x for v in given for x in (v if isinstance(v, list) else [v])]
        if dest in ("sets", "option"):
            items = [str(x).partition("=")[0].strip() for x in items]
        repeated = next((x for i, x in enumerate(items) if x in items[:i]), None)
        if repeated is not None:
            raise UserError(f"{opt}: {repeated} is given more than once; name each once")


def main(argv: list[str] | None = None) -> int:
    from authzbench.core import stopping

    args = build_parser().parse_args(argv)
    try:
        refuse_repeats(args)
    except UserError as e:
        console.print(f"authzbench: error: {e}", markup=False)
        return 2
    restore = None
    if (args.cmd in ("prepare", "bench", "loadtest", "crosscheck", "decide")
        and threading.current_thread() is threading.main_thread()):
        from authzbench.core.console import say

        restore = stopping.install(stopping.kill_children, say)
    try:
        return dispatch(args) or 0
    except UserError as e:
        console.print(f"authzbench: error: {e}", markup=False)  # messages may hold [brackets] (pip extras)
        return 2
    except (KeyboardInterrupt, stopping.Interrupted) as e:
        stopping.stop_children()  # servers whose start the signal cut short (no Deployment to stop them)
        name = "SIGINT" if isinstance(e, KeyboardInterrupt) else str(e)
        console.print(
            f"authzbench: interrupted by {name}; everything recorded so far is on disk", markup=False)
        return 130 if isinstance(e, KeyboardInterrupt) else e.exit_code
    finally:
        if restore:
            restore()


if __name__ == "__main__":
    sys.exit(main())
