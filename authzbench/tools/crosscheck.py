"""`authzbench crosscheck` (issue 47): the suite's own check phases beside an independent load tool on the
same server and the same inputs, interleaved in rounds (theirs, ours, theirs, ours ...):

- a SQL backend: pgbench (Debian's PostgreSQL build) running the adapter's own check query (its crosscheck's
  `statement`) as a custom script, `-M prepared` as psycopg prepares a repeated query; each transaction picks
  one of the phase's sampled inputs at random;
- a gRPC engine: ghz (provision/ghz.py) sending the adapter's own check request (its crosscheck's `requests`)
  for each of the phase's inputs, cycled, one connection per concurrent worker as the suite's workers each
  hold one, the key as bearer metadata.

Which backends take part, and with which tool, is each system's `crosscheck` module
(systems/<name>/crosscheck.py, named by its declaration).

Our side is the runner's phase (measure/runner.run_phase) on the spec the suite's plan makes
(phase_plan.phase_specs), so a figure is what `bench` would measure. Every run of either side is one record
(type "crosscheck", its latencies as an encoded HdrHistogram) in results/crosscheck/<run-id>/, rendered by
tools/crosscheck_report.py to reports/crosscheck-<run-id>.md.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from hdrh.histogram import HdrHistogram

from authzbench.core.console import say
from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.core.metrics import encode, merge, new_histogram
from authzbench.core.records import (
    BackendError,
    Crosscheck,
    CrosscheckServer,
    Record,
    as_dict,
)
from authzbench.systems import systems
from authzbench.tools.crosscheck_client import OURS_GRPC, cpu_spent, parts

CHECK_SCENARIOS = ("check_manage_direct_user", "check_manage_org_admin", "check_view_via_group_member",
                   "check_negative")
PGBENCH_TX_LOG = re.compile(r"^\d+ \d+ (\d+) \d+ \d+ \d+")  # client tx time(us) script epoch us [lag]


@dataclass
class Measured:
    """One run of one side: its latencies (µs histogram), answered ops, failed ops and measured seconds."""

    hist: HdrHistogram
    ops: int
    errors: int
    seconds: float

    @property
    def throughput(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else float("nan")


def _hist(latencies_us: Iterable[float]) -> HdrHistogram:
    h = new_histogram()
    for v in latencies_us:
        h.record_value(max(1, int(v)))
    return h


# ghz ---------------------------------------------------------------------------------------------------

def _epoch(ts: str) -> float:
    """Go's RFC 3339 time with nanoseconds ("2026-11-27T14:20:26.123456789Z" or "+01:00") as epoch seconds."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", ts)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {ts!r}")
    base = datetime.fromisoformat(m.group(1) + (m.group(3).replace("Z", "+00:00")))
    return base.timestamp() + float("0." + (m.group(2) or "0"))


def parse_ghz(report: dict[str, Any]) -> Measured:
    """ghz's `--format json` report: every reported request's latency (details, ns) into a histogram, answered
    ops = status OK, errors = the rest; seconds = from the first reported request's start to the last one's
    end (ghz's own total also counts the --skipFirst warm-up requests)."""
    details = report.get("details") or []
    ok = [d["latency"] / 1000 for d in details if d.get("status", "OK") == "OK" and not d.get("error")]
    if not details:
        return Measured(_hist([]), 0, 0, 0.0)
    starts = [_epoch(d["timestamp"]) for d in details]
    end = max(t + d["latency"] / 1e9 for t, d in zip(starts, details, strict=True))
    return Measured(_hist(ok), len(ok), len(details) - len(ok), end - min(starts))


def ghz_config(call: str, addr: str, data_file: Path, metadata: dict[str, str], concurrency: int,
               seconds: float = 0.0, requests: int = 0) -> dict[str, Any]:
    """ghz's settings as its --config file (kept 0600: the key never reaches argv): a closed loop of
    `concurrency` workers, one connection each, for `seconds` (requests in flight at the end waited for, as
    the runner waits for its workers' last ops) or for `requests` requests (a warm-up); protos by server
    reflection, which Permify keeps behind the key too."""
    length = {"duration": f"{seconds:g}s", "duration-stop": "wait"} if seconds else {"total": requests}
    return {"call": call, "host": addr, "insecure": True, "data-file": str(data_file), "metadata": metadata,
            "reflect-metadata": metadata, "concurrency": concurrency, "connections": concurrency, **length,
            "format": "json", "timeout": "20s"}


# pgbench ----------------------------------------------------------------------------------------------

def case_tree(values: Sequence[int], var: str = "k", lo: int = 0, hi: int | None = None) -> str:
    """A pgbench expression worth values[:k:] (the k-th value), as a balanced tree of CASE: pgbench has no
    arrays, and a flat CASE of 2,000 inputs would cost ~2,000 comparisons a transaction; this costs 11."""
    hi = len(values) if hi is None else hi
    if hi - lo == 1:
        return str(int(values[lo]))
    mid = (lo + hi) // 2
    return (f"case when :{var} < {mid} then {case_tree(values, var, lo, mid)} "
            f"else {case_tree(values, var, mid, hi)} end")


def pgbench_script(sql: str, params: Sequence[str], inputs: Sequence[dict[str, int]]) -> str:
    """The adapter's query as a pgbench script: a random input k each transaction, its parameters set from
    it (\\set, client side), then the query with its %s placeholders as :name variables in order."""
    if sql.count("%s") != len(params):
        raise ValueError(f"the query has {sql.count('%s')} placeholders for {len(params)} parameters")
    lines = [f"\\set k random(0, {len(inputs) - 1})"]
    lines += [f"\\set {p} {case_tree([x[p] for x in inputs])}" for p in params]
    query = sql
    for p in params:
        query = query.replace("%s", f":{p}", 1)
    return "\n".join([*lines, query + ";"]) + "\n"


def parse_pgbench(stdout: str, log_lines: Iterable[str]) -> Measured:
    """pgbench's summary (tps without the initial connection time, failed transactions) and its per-
    transaction log (-l: the 3rd field is the transaction's time in µs)."""
    lat = [int(m.group(1)) for line in log_lines if (m := PGBENCH_TX_LOG.match(line))]
    tps = re.search(r"^tps = ([\d.]+) \(without initial connection time\)", stdout, re.M)
    failed = re.search(r"^number of failed transactions: (\d+)", stdout, re.M)
    if not tps:
        raise ValueError("pgbench printed no tps line")
    rate = float(tps.group(1))
    return Measured(
        _hist(lat), len(lat), int(failed.group(1)) if failed else 0, len(lat) / rate if rate else 0.0)


def pgbench_command(exe: Path, script: Path, dsn: str, concurrency: int, seconds: int, log_prefix: Path,
                    transactions: int = 0) -> list[str]:
    """`concurrency` clients (and threads, as the suite's workers are processes) for `seconds` (or, for a
    warm-up, `transactions` each), no vacuum, prepared statements, a per-transaction log."""
    length = ["-t", str(transactions)] if transactions else ["-T", str(seconds)]
    return [str(exe), "-n", "-M", "prepared", "-c", str(concurrency), "-j", str(concurrency), *length,
            "-f", str(script), "-l", "--log-prefix", str(log_prefix), dsn]


# the independent side of one phase ------------------------------------------------------------------

@dataclass
class Theirs:
    """How to run the independent tool on one phase's inputs: run(inputs, concurrency, seconds, warm-up) ->
    (Measured, the command line with no secret in it)."""

    tool: str
    version: str
    run: Callable[[list, int, float, int], tuple[Measured, str]]


def _slice(inputs: list, offset: int, n: int) -> list:
    """The phase's inputs as the runner takes them: n from `offset`, wrapping; at most one pass (a tool cycles
    through its requests as the runner does, and a cap of 64,000 ops need not be written out)."""
    return [inputs[(offset + i) % len(inputs)] for i in range(min(n, len(inputs)))]


def backends() -> list[str]:
    """The backends a cross-check speaks to: those whose declaration names a crosscheck module."""
    return [n for n, s in systems().items() if s.crosscheck]


def pgbench_side(endpoint: dict[str, Any], timeout_s: float, workdir: Path,
                 check_statement: Callable[[str], tuple[str, list[str]]]) -> Theirs:
    from authzbench.provision.pgcluster import bin_dir

    exe = bin_dir() / "pgbench"
    if not exe.is_file():
        raise BackendUnavailable(f"pgbench not found beside the PostgreSQL server binaries ({exe})")
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True).stdout.strip()
    dsn = endpoint.get("dsn") or endpoint.get("url") or ""
    # The adapter's server-side statement limit (systems/postgres/adapter.connect), for pgbench's sessions
    # too.
    env = {**os.environ, "PGOPTIONS": f"-c statement_timeout={int(timeout_s * 1000)}",
           **({"PGPASSWORD": endpoint["password"]} if endpoint.get("password") else {})}

    def run(inputs: list, concurrency: int, seconds: float, warmup: int) -> tuple[Measured, str]:
        perm = inputs[0][1][1]
        sql, params = check_statement(perm)
        rows = [dict(zip(("user", "perm", "resource"), args, strict=True)) for _, args, _ in inputs]
        d = Path(tempfile.mkdtemp(dir=workdir))
        script = d / "check.sql"
        script.write_text(pgbench_script(sql, params, rows))
        if warmup:  # a run of its own, as the runner's warm-up runs before its measured window
            _pgbench(
                pgbench_command(exe, script, dsn, concurrency, 0, d / "warm", -(-warmup // concurrency)), env,
                120.0)
            for f in glob.glob(str(d / "warm.*")):
                os.unlink(f)
        cmd = pgbench_command(exe, script, dsn, concurrency, max(1, round(seconds)), d / "tx")
        out = _pgbench(cmd, env, seconds + 120)
        lines = [ln for f in sorted(glob.glob(str(d / "tx.*"))) for ln in Path(f).read_text().splitlines()]
        shutil.rmtree(d, ignore_errors=True)
        return parse_pgbench(out.stdout, lines), " ".join([*cmd[:-1], "DSN"]).replace(str(d), "DIR")

    return Theirs("pgbench", version, run)


def _pgbench(cmd: list[str], env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
    if out.returncode != 0:
        raise BackendUnavailable(f"pgbench failed ({out.returncode}): {out.stderr.strip()[-300:]}")
    return out


def grpc_requests(backend: Any, name: str, inputs: list) -> list[dict[str, Any]]:
    """The adapter's own check request for every input, in protobuf JSON (what ghz's --data-file takes)."""
    return parts(name).requests(backend, inputs)


def ghz_side(name: str, backend: Any, endpoint: dict[str, Any], workdir: Path) -> Theirs:
    from authzbench.provision.ghz import GHZ_VERSION, ghz_binary

    exe = ghz_binary()
    addr = endpoint.get("grpc_addr") or endpoint.get("addr")
    if not addr or endpoint.get("tls") or endpoint.get("grpc_tls"):
        raise UserError(f"crosscheck: {name}: ghz needs a plaintext gRPC address in the endpoint")
    metadata = {"authorization": f"Bearer {endpoint.get('preshared_key') or ''}"}

    def run(inputs: list, concurrency: int, seconds: float, warmup: int) -> tuple[Measured, str]:
        data = workdir / "requests.json"
        data.write_text(json.dumps(grpc_requests(backend, name, inputs)))
        if warmup:  # a run of its own, as the runner's warm-up runs before its measured window
            _ghz_json(exe, workdir, ghz_config(parts(name).GRPC_CALL, addr, data, metadata, concurrency,
                                               requests=max(warmup, concurrency)), 120.0)
        cfg = ghz_config(parts(name).GRPC_CALL, addr, data, metadata, concurrency, seconds)
        report = _ghz_json(exe, workdir, cfg, seconds + 120)
        m = parse_ghz(report)
        if m.errors:  # a tool run with failed requests is not a figure to compare: say why
            raise BackendUnavailable(f"ghz: {m.errors} of {m.ops + m.errors} requests failed: "
                                     f"{json.dumps(report.get('errorDistribution'))[:300]}")
        shown = {k: ("Bearer ***" if "metadata" in k else v) for k, v in cfg.items()} | {
            "data-file": data.name}
        return m, f"ghz --config {json.dumps(shown)}"

    return Theirs("ghz", GHZ_VERSION, run)


def _ghz_json(exe: Path, workdir: Path, config: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Run ghz with `config`; its JSON report (which holds the metadata, key included: never stored)."""
    path = workdir / "ghz.json"
    path.touch(mode=0o600)
    path.write_text(json.dumps(config))
    out = subprocess.run([str(exe), "--config", str(path)], capture_output=True, text=True, timeout=timeout_s)
    if out.returncode != 0 or not out.stdout.strip().startswith("{"):
        raise BackendUnavailable(
            f"ghz failed ({out.returncode}): {(out.stderr or out.stdout).strip()[-300:]}")
    return json.loads(out.stdout)


# our side: the runner's phase -----------------------------------------------------------------------

def ours_from_records(records: Sequence[dict[str, Any]], phase_id: str) -> Measured:
    """A phase's check latencies, ops, failures and window from the records the runner wrote."""
    intervals = [
        r for r in records if r.get("type") == "interval" and r["phase"] == phase_id and r["kind"] == "check"]
    end = next(r for r in records if r.get("type") == "phase_end" and r["phase"] == phase_id)
    errors = sum(r["timeouts"] + sum(r["errors"].values()) for r in intervals)
    return Measured(merge(r["hist"] for r in intervals), int(end["ops"]), errors, float(end["wall_s"]))


def record(m: Measured, **fields: Any) -> Crosscheck:
    h = m.hist
    return Crosscheck(
        **fields, ops=m.ops, errors=m.errors, seconds=m.seconds, throughput=m.throughput,
        p50_ms=h.get_value_at_percentile(50) / 1000, p95_ms=h.get_value_at_percentile(95) / 1000,
        hist=encode(h))


def seconds_scale(seconds: float, rounds: int) -> float:
    """--iterations-scale that makes the suite's read budget (4 s over its rounds) `seconds` a round."""
    from authzbench.workloads.catalog import READ_BUDGET_S

    return seconds * rounds / READ_BUDGET_S


# the command ---------------------------------------------------------------------------------------

@dataclass
class Plan:
    backends: list[str]
    scenarios: list[str]
    concurrency: list[int]
    rounds: int
    seconds: int
    breakdown_calls: int
    tier: str = "cached"  # provision/tiers.py: the engines' answer caches and read consistency


def _our_phase(sess: Any, spec: Any, inputs: list, store: Any, kept: Any, grpc: bool = False,
               on_window: Callable[[bool], None] | None = None) -> Measured:
    from authzbench.backends.registry import backend_class
    from authzbench.measure.runner import run_phase
    from authzbench.tools.crosscheck_client import grpc_factory

    seen: list[dict[str, Any]] = []

    def sink(rec: Record) -> None:
        seen.append(as_dict(rec))
        store.append(rec)

    factory = sess.factory(dataset_path=sess.options.get("dataset_path"), timeout_s=spec.timeout_s)
    if grpc:  # its own phase id: its records are not the HTTP phase's
        factory, spec = grpc_factory(factory, sess.name), replace(spec, backend=f"{spec.backend}-grpc")
    res = run_phase(spec, factory, inputs, sink, backend_class(sess.name).concurrency, on_window, kept=kept)
    if res.status not in ("complete",):
        raise BackendUnavailable(f"{spec.phase_id}: {res.status}: {res.reason}")
    return ours_from_records(seen, spec.phase_id)


def run_backend(sess: Any, cfg: Any, ds: Any, oracle: Any, store: Any, plan: Plan) -> None:
    """Load one started backend (skipped when the same dataset is loaded), then every phase of the plan:
    theirs, then ours, round by round; then, at 1 worker, where our time goes."""
    from dataclasses import asdict

    from authzbench.measure.pools import KeptWorkers
    from authzbench.run.loading import load_backend
    from authzbench.run.phase_plan import BackendTraits, phase_specs
    from authzbench.tools import crosscheck_client

    name = sess.name
    sess.options["dataset_path"] = str(ds.path)
    load_backend(sess, ds, store, cfg.servers.reload)
    specs = phase_specs(cfg.schedule, cfg.mixed, BackendTraits.of(name, cfg.servers.options), ds)
    timeout_s = specs[0][0].timeout_s
    with sess.backend(dataset_path=str(ds.path), timeout_s=timeout_s) as b, \
            tempfile.TemporaryDirectory(prefix="crosscheck-") as tmp, KeptWorkers() as kept:
        info = b.server_info()
        own = parts(name)
        theirs = (
            pgbench_side(sess.dep.endpoint, timeout_s, Path(tmp), own.statement)
            if own.TOOL == "pgbench"
            else ghz_side(name, b, sess.dep.endpoint, Path(tmp))
        )
        store.append(CrosscheckServer(
                         backend=name, label=info.label, mode=sess.dep.mode, consistency=info.consistency,
                         tool=theirs.tool, tool_version=theirs.version, client=own.CLIENT, info=asdict(info),
                         settings=sess.dep.endpoint.get("engine_settings")))
        say(f"crosscheck {name}: {info.label}; {theirs.tool} {theirs.version}")
        on = _OnBackend(sess, ds, oracle, store, theirs, kept, cfg.schedule.iterations_scale, {})
        for spec, sname in specs:
            _one_phase(on, spec, sname)
        for sname in plan.scenarios if plan.breakdown_calls and 1 in plan.concurrency else []:
            crosscheck_client.breakdown_of(
                b, name, sess.dep.endpoint, on.inputs[sname], plan.breakdown_calls, store, sname)


@dataclass(frozen=True)
class _OnBackend:
    """What every phase on one loaded backend shares (run_backend): its session, the dataset and oracle, the
    store, the tool's side, the kept workers, and the inputs sampled so far (per scenario)."""

    sess: Any
    ds: Any
    oracle: Any
    store: Any
    theirs: Theirs
    kept: Any
    iterations_scale: float
    inputs: dict[str, list]


def _one_phase(on: _OnBackend, spec: Any, sname: str) -> None:
    """One phase of the plan: the tool on the phase's inputs, then the runner's phase on the same inputs."""
    from authzbench.workloads.catalog import input_count, scenario

    sess, ds, oracle, store, theirs, kept, inputs = (
        on.sess, on.ds, on.oracle, on.store, on.theirs, on.kept, on.inputs)
    iterations_scale = on.iterations_scale

    sc = scenario(sname)
    if sname not in inputs:  # as orchestrate samples them: the same inputs bench measures
        inputs[sname] = sc.sampler(ds, oracle, input_count(sc, iterations_scale))
    common = {"backend": sess.name, "scenario": sname, "concurrency": spec.concurrency, "round": spec.repeat,
              "phase": spec.phase_id, "warmup": spec.warmup}
    for side in sides_in_order(spec.repeat, grpc=hasattr(parts(sess.name), "GRPC_BACKEND")):
        say(f"crosscheck {spec.phase_id}: {theirs.tool if side == 'theirs' else side}")
        with cpu_spent(side, list(sess.dep.pids) if sess.dep.mode == "native" else []) as cpu:
            if side == "theirs":
                m, cmd = theirs.run(
                    _slice(inputs[sname], spec.input_offset, spec.iterations), spec.concurrency,
                    float(spec.budget_s), spec.warmup)
            else:
                m = _our_phase(sess, spec, inputs[sname], store, kept, side == OURS_GRPC, cpu.window)
        who = {"tool": theirs.tool, "command": cmd} if side == "theirs" else {"tool": "authzbench"}
        store.append(record(m, side=side, **who, **cpu.per_op_ms(m.ops), load=os.getloadavg(), **common))


def sides_in_order(round_: int, grpc: bool = False) -> tuple[str, ...]:
    """Theirs first in even rounds, ours first in odd ones (theirs, ours, ours, theirs, ...): the second run
    on a phase's inputs meets the answers the first left in the engine's caches, so neither side always does.
    With OpenFGA's gRPC side, it runs last when the tool runs first and first when it runs last."""
    sides = ("theirs", "ours", OURS_GRPC) if grpc else ("theirs", "ours")
    return sides if round_ % 2 == 0 else sides[::-1]


def run_command(plan: Plan, profile: str, provision: str | None, results_dir: Path | None, report_dir: Path,
                data_dir: Path | None) -> Path:
    from authzbench.config import BenchConfig, DatasetChoice, Schedule, ServerChoice
    from authzbench.provision.manager import default_mode
    from authzbench.results.store import RunStore, default_results_dir
    from authzbench.run.dataset import dataset_of
    from authzbench.run.servers import Session
    from authzbench.tools.crosscheck_report import render_run
    from authzbench.truth.social_oracle import oracle_for

    cfg = BenchConfig(
        data=DatasetChoice(model="rebac", profile=profile, data_dir=data_dir),
        servers=ServerChoice(backends=plan.backends, provision=provision or default_mode(), tier=plan.tier),
        schedule=Schedule(
            scenarios=plan.scenarios, concurrency=plan.concurrency, rounds=plan.rounds,
            iterations_scale=seconds_scale(plan.seconds, plan.rounds), visits=1, full_curve=True),
    )  # pgbench and ghz run every scenario at each count
    cfg.validate()
    store = RunStore.create(
        (results_dir or default_results_dir()) / "crosscheck",
        config={"command": "crosscheck", "profile": profile, "provision": cfg.servers.provision,
                **{k: v for k, v in plan.__dict__.items()}})
    say(f"crosscheck results: {store.path}")
    # The load before any server starts: a machine already busy shares its cores with both sides.
    store.update_manifest(load_at_start=list(os.getloadavg()))
    ds = dataset_of(cfg.data)
    store.update_manifest(
        dataset={"profile": ds.profile, "hash": ds.hash, "relationships": ds.total_relationships})
    oracle = oracle_for(ds)
    failures = []
    for name in plan.backends:
        sess = None
        try:
            sess = Session(name, cfg.servers, cfg.data.model)
            run_backend(sess, cfg, ds, oracle, store, plan)
        except (BackendUnavailable, subprocess.TimeoutExpired) as e:
            failures.append(f"{name}: {e}")
            store.append(BackendError(backend=name, stage="crosscheck", message=str(e)))
            say(f"crosscheck {name}: {e}")
        finally:
            if sess is not None and sess.started_here:
                sess.stop()
    path = render_run(store.path, report_dir)
    if failures:
        raise UserError("crosscheck: " + "; ".join(failures) + f" (report of the rest: {path})")
    return path
