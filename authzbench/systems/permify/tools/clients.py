"""Which client the Permify adapter should use (issue 28): each client's overhead against the round trip of
its transport, on one real Permify server loaded with a dataset (default `tiny`, rebac).

    python -m authzbench.systems.permify.tools.clients [--checks 3000] [--rounds 6] \
        [--out reports/permify-clients.md]

Starts Permify natively and loads it the way `authzbench prepare` does (or reuses the server `authzbench up
permify` / `prepare` left running, and then leaves it running), and stops what it started.

The clients, each on its own connection, asked the same fixed list of checks (the `mixed` read sampler:
direct-manager, org-admin, group-viewer and negative checks in turn, each with the oracle's answer):

- `rest-typed`: the permify package's typed API, PermissionApi.permissions_check with its pydantic models; -
`rest-dict`: the adapter's path before it switched to gRPC (plain-dict JSON over the package's urllib3 pool);
- `grpc`: the adapter as it is, PermifyBackend.check: base.v1.Permission/Check on grpcio, its message classes
  built at connect from the server's gRPC reflection (authzbench.systems.permify.grpc), the key as
  per-call metadata;

and the round trip of each transport, which does no authorization work: GET /healthz over the REST pool
(Permify's HTTP server is a grpc-gateway: it answers by calling the gRPC health service) and
grpc.health.v1.Health/Check on the adapter's channel.

The list is cut into `rounds` chunks; round i runs chunk i through every client, in an order rotated by i, so
a slow period of the shared machine lands on every client. Before the rounds the adapter asks the whole list
once (Permify's check cache then answers every measured call alike) and each client warms its connection.
Every call is timed, counted and its answer compared with the oracle's by the bench's own measurement
(measure/timing.py, as a worker's op in every `bench` phase). Figures: latency p50/p95 over all calls (its
HdrHistogram, µs at 3 significant digits); client CPU per call = this process's CPU over a block
(time.process_time: every thread, grpc's own included) / the block's calls, the median of the rounds with
their range; server CPU per call = the Permify process's CPU over the block (psutil; Linux counts it in
10 ms ticks, so only a block of many calls says anything) / the block's calls; overhead = a check client's
figure minus its transport's round trip.

Every answer is compared with the oracle's and with the other clients': a mismatch, or a call that failed,
ends the run with exit code 1 and no table.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from authzbench.core.metrics import percentile
from authzbench.measure.timing import OpCounters, Timed, timed

MAX_EXAMPLES = 5  # failed calls kept with their error, per client
CheckInput = tuple[int, str, int, bool]  # user, permission, resource, the oracle's answer
Call = Callable[[CheckInput], bool | None]  # a check's answer; None from a round trip


@dataclass
class Client:
    name: str
    transport: str  # "REST" | "gRPC"
    call: Call
    roundtrip: bool = False  # does no authorization work: its transport's floor
    what: str = ""


@dataclass
class Samples:
    # the bench's measurement: latency (µs), errors, answers
    ops: OpCounters = field(default_factory=OpCounters)
    cpu_ns: list[float] = field(default_factory=list)  # a round's client CPU per call
    server_ns: list[float] = field(default_factory=list)  # a round's server CPU per call (empty: unknown)
    answers: dict[int, bool] = field(default_factory=dict)  # input index -> the client's answer


@dataclass(frozen=True)
class Row:
    client: str
    transport: str
    what: str
    calls: int
    p50_ms: float
    p95_ms: float
    cpu_us: float  # client CPU per call, median of rounds
    cpu_lo_us: float
    cpu_hi_us: float
    server_us: float | None
    over_p50_ms: float | None = None  # minus the transport's round trip (None for a round trip)
    over_cpu_us: float | None = None
    # client CPU / the reference client's, per round: median, lo, hi
    vs_ref: tuple[float, float, float] | None = None


# pure logic ----------------------------------------------------------------------------------------

def chunks(n: int, rounds: int) -> list[range]:
    """n inputs cut into `rounds` consecutive, near-equal chunks (none empty)."""
    rounds = max(1, min(rounds, n))
    edges = [n * i // rounds for i in range(rounds + 1)]
    return [range(a, b) for a, b in zip(edges, edges[1:], strict=False)]


def rotated(seq: Sequence[Client], i: int) -> list[Client]:
    k = i % len(seq) if seq else 0
    return [*seq[k:], *seq[:k]]


def mismatches(inputs: Sequence[CheckInput], answers: dict[str, dict[int, bool]]) -> list[str]:
    """One line per input on which a client's answer differs from the oracle's or a client gave none."""
    out = []
    for i, (user, perm, resource, want) in enumerate(inputs):
        got = {name: a.get(i) for name, a in answers.items()}
        if any(v is not want for v in got.values()):
            shown = ", ".join(f"{name}={v}" for name, v in got.items())
            out.append(f"check(user {user}, {perm}, resource {resource}): oracle={want}, {shown}")
    return out


def failures(name: str, s: Samples) -> list[str]:
    """One line for a client whose calls failed or timed out (every call must answer for its figures to
    hold)."""
    n = s.ops.timeouts + sum(s.ops.errors.values())
    shown = "; ".join(e["error"] for e in s.ops.examples if "error" in e)
    return [f"{name}: {n:,} calls failed ({s.ops.timeouts:,} timed out) {shown}".rstrip()] if n else []


def summarize(clients: Sequence[Client], samples: dict[str, Samples], ref: str | None = None) -> list[Row]:
    """A row per client; a check client's overhead is its figure minus its transport's round trip. With
    `ref`, a check client's CPU is also divided by the reference client's round by round (the two ran
    within seconds of each other, so the ratio is paired, not two medians of different periods)."""
    rows: dict[str, Row] = {}
    for c in clients:
        s = samples[c.name]
        rows[c.name] = Row(c.name, c.transport, c.what, s.ops.ops, percentile(s.ops.hist, 50) / 1e3,
                           percentile(s.ops.hist, 95) / 1e3, statistics.median(s.cpu_ns) / 1e3,
                           min(s.cpu_ns) / 1e3, max(s.cpu_ns) / 1e3,
                           statistics.median(s.server_ns) / 1e3 if s.server_ns else None)
    floor = {c.transport: rows[c.name] for c in clients if c.roundtrip}
    out = []
    for c in clients:
        r, f = rows[c.name], floor.get(c.transport)
        if not c.roundtrip and f is not None:
            r = Row(**{**r.__dict__, "over_p50_ms": r.p50_ms - f.p50_ms, "over_cpu_us": r.cpu_us - f.cpu_us})
        if not c.roundtrip and ref in samples:
            ratios = [a / b for a, b in zip(samples[c.name].cpu_ns, samples[ref].cpu_ns, strict=True)]
            r = Row(**{**r.__dict__, "vs_ref": (statistics.median(ratios), min(ratios), max(ratios))})
        out.append(r)
    return out


def render(rows: Sequence[Row], context: Sequence[str], ref: str = "") -> str:
    def opt(v: float | None, fmt: str) -> str:
        return "" if v is None else format(v, fmt)

    lines = ["# Permify: client overhead against the round trip", "", *(f"- {c}" for c in context), "",
             "| client | transport | calls | p50 ms | p95 ms | p50 − round trip ms | client CPU µs/call "
             f"(rounds' range) | CPU − round trip µs | CPU ÷ {ref or 'reference'}'s, paired rounds | "
             "server CPU µs/call | what |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in rows:
        vs = "" if r.vs_ref is None else f"{r.vs_ref[0]:.2f} ({r.vs_ref[1]:.2f}-{r.vs_ref[2]:.2f})"
        lines.append(f"| {r.client} | {r.transport} | {r.calls:,} | {r.p50_ms:.3f} | {r.p95_ms:.3f} | "
                     f"{opt(r.over_p50_ms, '.3f')} | {r.cpu_us:.0f} ({r.cpu_lo_us:.0f}-{r.cpu_hi_us:.0f}) | "
                     f"{opt(r.over_cpu_us, '.0f')} | {vs} | {opt(r.server_us, '.0f')} | {r.what} |")
    return "\n".join(lines) + "\n"


# the clients -------------------------------------------------------------------------------------

def adapter_client(backend: Any) -> Client:
    return Client(
        "grpc", "gRPC", lambda c: backend.check(c[0], c[1], c[2]),
        what="the adapter: PermifyBackend.check, base.v1.Permission/Check over grpcio, classes from "
        "server reflection")


def grpc_roundtrip_client(backend: Any) -> Client:
    """grpc.health.v1.Health/Check on the adapter's channel (no key: the health service asks for none)."""
    from authzbench.systems.permify.grpc import PermifyError

    name = "grpc.health.v1.Health.Check"
    m, serving, timeout = (
        backend.api.method(name), backend.api.enum(name, "status", "SERVING"), backend.timeout)

    def call(_: CheckInput) -> None:
        if m.rpc(m.request(), timeout=timeout).status != serving:
            raise PermifyError("OK", "grpc.health.v1.Health/Check: not SERVING")

    return Client("grpc-roundtrip", "gRPC", call, roundtrip=True,
                  what="grpc.health.v1.Health/Check on the adapter's channel (no key)")


def rest_typed_client(url: str, key: str, tenant: str, metadata: dict[str, Any], timeout: float) -> Client:
    import permify

    from authzbench.schema.model import PERMISSION_TARGETS

    # The package's API methods name no auth settings: the key goes as a default header, as Permify's docs do.
    api = permify.PermissionApi(
        permify.ApiClient(
            permify.Configuration(host=url), header_name="Authorization", header_value=f"Bearer {key}"))
    allowed, targets = permify.CheckResult.CHECK_RESULT_ALLOWED, PERMISSION_TARGETS["rebac"]

    def call(c: CheckInput) -> bool:
        obj_type, permission = targets[c[1]]
        body = permify.CheckBody(metadata=permify.PermissionCheckRequestMetadata(**metadata),
                                 entity=permify.Entity(type=obj_type, id=str(c[2])), permission=permission,
                                 subject=permify.Subject(type="user", id=str(c[0])))
        return api.permissions_check(tenant, body, _request_timeout=timeout).can == allowed

    return Client("rest-typed", "REST", call, what="permify.PermissionApi.permissions_check, pydantic models")


class RestDict:
    """The adapter's path before it switched to gRPC: JSON bodies as plain dicts, POSTed over the permify
    package's urllib3 pool (its configuration, no retries)."""

    def __init__(self, url: str, key: str, timeout: float) -> None:
        import permify
        import urllib3

        self.pool = permify.ApiClient(permify.Configuration(host=url)).rest_client.pool_manager
        self.url = url
        self.headers = {
            "Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
        self.timeout = urllib3.Timeout(total=timeout)
        self.retries = urllib3.Retry(total=0, redirect=0, raise_on_redirect=False)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        from authzbench.systems.permify.grpc import PermifyError

        r = self.pool.request(
            method, self.url + path, body=None if body is None else json.dumps(body).encode(),
            headers=self.headers, timeout=self.timeout, retries=self.retries)
        data = json.loads(r.data or b"{}")
        if r.status >= 400:
            raise PermifyError(str(r.status), str(data.get("message") or r.data[:200]))
        return data

    def check(self, tenant: str, metadata: dict[str, Any]) -> Client:
        from authzbench.schema.model import PERMISSION_TARGETS

        path, targets = f"/v1/tenants/{tenant}/permissions/check", PERMISSION_TARGETS["rebac"]

        def call(c: CheckInput) -> bool:
            obj_type, permission = targets[c[1]]
            resp = self.request("POST", path,
                                {"metadata": metadata, "entity": {"type": obj_type, "id": str(c[2])},
                                 "permission": permission, "subject": {"type": "user", "id": str(c[0])}})
            return resp.get("can") == "CHECK_RESULT_ALLOWED"

        return Client(
            "rest-dict", "REST", call,
            what="the adapter's REST path before gRPC: plain-dict JSON over the package's urllib3 pool")

    def roundtrip(self) -> Client:
        """GET /healthz on the same pool, headers and timeouts; the body decoded as a response is."""
        from authzbench.systems.permify.grpc import PermifyError

        def call(_: CheckInput) -> None:
            if self.request("GET", "/healthz").get("status") != "SERVING":
                raise PermifyError("200", "/healthz: not SERVING")

        return Client("rest-roundtrip", "REST", call, roundtrip=True,
                      what="GET /healthz (the gateway calls the gRPC health service)")

    def close(self) -> None:
        self.pool.clear()


# the measurement -------------------------------------------------------------------------------

def _cpu_ns(proc: Any) -> float | None:
    if proc is None:
        return None
    t = proc.cpu_times()
    return (t.user + t.system) * 1e9


def run_block(c: Client, inputs: Sequence[CheckInput], idx: range, s: Samples, server: Any) -> None:
    """The block's calls, each timed by the bench's measurement (measure/timing.py); they are counted, and
    a check's answer compared with the oracle's, after the block's CPU is read, so the client CPU per call
    holds the client's work, not the bookkeeping's."""
    gc.collect()  # one client's garbage is not collected on another's time
    done: list[Timed] = []
    srv0, cpu0 = _cpu_ns(server), time.process_time_ns()
    for i in idx:
        done.append(timed(functools.partial(c.call, inputs[i])))
    cpu1, srv1 = time.process_time_ns(), _cpu_ns(server)
    s.cpu_ns.append((cpu1 - cpu0) / len(idx))
    if srv0 is not None and srv1 is not None:
        s.server_ns.append((srv1 - srv0) / len(idx))
    for i, t in zip(idx, done, strict=True):
        user, perm, resource, want = inputs[i]
        s.ops.add(
            None if c.roundtrip else ("check", (user, perm, resource), want), t, max_examples=MAX_EXAMPLES)
        if t.answer is not None:
            s.answers[i] = t.answer


def measure(clients: Sequence[Client], inputs: Sequence[CheckInput], rounds: int, warmup: int,
            server: Any) -> tuple[dict[str, Samples], list[str]]:
    """Warm-up calls, then the rounds; (samples per client, mismatches of every answer seen)."""
    bad: list[str] = []
    for c in clients:
        w = Samples()
        run_block(c, inputs, range(min(warmup, len(inputs))), w, server)
        bad += failures(f"{c.name} (warm-up)", w)
        if not c.roundtrip:
            bad += [
                f"{c.name} (warm-up): {m}" for m in mismatches(inputs[: len(w.answers)], {c.name: w.answers})]
    samples = {c.name: Samples() for c in clients}
    for i, idx in enumerate(chunks(len(inputs), rounds)):
        for c in rotated(clients, i):
            run_block(c, inputs, idx, samples[c.name], server)
    bad += mismatches(inputs, {c.name: samples[c.name].answers for c in clients if not c.roundtrip})
    bad += [line for c in clients for line in failures(c.name, samples[c.name])]
    return samples, bad


def _versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{p} {version(p)}"
                     for p in ("permify", "urllib3", "pydantic", "grpcio", "grpcio-reflection", "protobuf"))


def run(args: argparse.Namespace) -> int:
    from authzbench.core.console import say
    from authzbench.run.servers import Session

    cfg, ds, inputs = _dataset_and_inputs(args)
    load0 = os.getloadavg()
    sess = Session("permify", cfg.servers, cfg.data.model)
    try:
        info, clients, ref, samples, seconds, bad = _measure_clients(sess, ds, inputs, args)
    finally:
        if sess.started_here:
            sess.stop()
    load1 = os.getloadavg()
    if bad:
        print(f"permify_clients: MISMATCH: {len(bad)} answers differ from the oracle's or between clients, "
              "or calls failed:",
              *bad[:20], sep="\n  ", file=sys.stderr)
        return 1
    context = _context(args, f"{info.label} ({sess.dep.mode})", ds, inputs, seconds, (load0, load1))
    text = render(summarize(clients, samples, ref=ref), context, ref=ref)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    say(f"permify_clients: table written to {args.out}")
    return 0


def _dataset_and_inputs(args: argparse.Namespace) -> tuple[Any, Any, list[CheckInput]]:
    """(config, dataset, the checks with the oracle's answers): --checks mixed reads of rebac `--profile`."""
    from authzbench.config import BenchConfig, DatasetChoice, ServerChoice
    from authzbench.provision.manager import default_mode
    from authzbench.run.dataset import dataset_of
    from authzbench.truth.oracle import Oracle
    from authzbench.workloads.catalog import sample_mixed_reads

    cfg = BenchConfig(data=DatasetChoice(model="rebac", profile=args.profile, data_dir=args.data_dir),
                      servers=ServerChoice(backends=["permify"], provision=args.provision or default_mode()))
    cfg.validate()
    ds = dataset_of(cfg.data)
    oracle = Oracle(ds)
    inputs: list[CheckInput] = [(int(u), str(p), int(r), bool(want))
                                for _, (u, p, r), want in sample_mixed_reads(ds, oracle, args.checks)]
    return cfg, ds, inputs


def _measure_clients(sess: Any, ds: Any, inputs: list[CheckInput], args: argparse.Namespace
                     ) -> tuple[Any, list[Client], str, dict[str, Samples], float, list[str]]:
    """Load the dataset, warm Permify's check cache through the adapter, then measure every client: (server
    info, the clients, the reference client's name, samples per client, seconds measured, mismatches)."""
    import psutil

    from authzbench.core.console import say
    from authzbench.run.loading import load_backend
    from authzbench.systems.permify.adapter import DEPTH

    rest: RestDict | None = None
    try:
        load_backend(sess, ds, None, reload=False)
        ep = sess.dep.endpoint
        with sess.backend(consistency="fully_consistent", timeout_s=10) as b:
            info = b.server_info()
            # as b.check sends
            metadata = {"schema_version": b.schema_version, "snap_token": "", "depth": DEPTH}
            say(f"permify_clients: warming Permify's check cache with the {len(inputs):,} checks (the "
                "adapter)")
            prewarm = Samples()
            adapter = adapter_client(b)
            run_block(adapter, inputs, range(len(inputs)), prewarm, None)
            bad = [f"{adapter.name} (cache warm-up): {m}"
                   for m in mismatches(inputs, {adapter.name: prewarm.answers})]
            bad += failures(f"{adapter.name} (cache warm-up)", prewarm)
            rest = RestDict(ep["url"], ep.get("preshared_key") or "", 10.0)
            clients = [rest_typed_client(ep["url"], ep.get("preshared_key") or "", b.tenant, metadata, 10.0),
                       rest.check(b.tenant, metadata), adapter, rest.roundtrip(), grpc_roundtrip_client(b)]
            server = psutil.Process(sess.dep.pids[0]) if sess.dep.mode == "native" and sess.dep.pids else None
            say(f"permify_clients: {len(clients)} clients x {len(inputs):,} calls in {args.rounds} rounds")
            t0 = time.perf_counter()
            samples, more = measure(clients, inputs, args.rounds, args.warmup, server)
            seconds = time.perf_counter() - t0
            bad += more
    finally:
        if rest is not None:
            rest.close()
    return info, clients, adapter.name, samples, seconds, bad


def _context(args: argparse.Namespace, server: str, ds: Any, inputs: list[CheckInput], seconds: float,
             loads: tuple[tuple[float, float, float], tuple[float, float, float]]) -> list[str]:
    """The table's context lines: the command, the server, the checks, the machine's load, the clients."""
    (load0, load1), positives = loads, sum(x[3] for x in inputs)
    return [
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"`{' '.join(['python -m authzbench.systems.permify.tools.clients', *args.argv])}`, {seconds:.0f} s "
        "measured.",
        f"Server: {server}, on this {os.cpu_count()}-core machine. Dataset: rebac "
        f"`{args.profile}`, hash `{ds.hash[:16]}`.",
        f"{len(inputs):,} checks ({positives:,} allowed; direct-manager, org-admin, group-viewer and "
        "negative in "
        f"turn), every one asked of every client in {args.rounds} rounds (round i: chunk i, client order "
        "rotated by i), after one pass through the adapter (gRPC) that warmed Permify's check cache and "
        f"{args.warmup} "
        "warm-up calls per client; all answers equal the oracle's.",
        f"Load average (1, 5, 15 min) at the start {load0[0]:.2f}, {load0[1]:.2f}, {load0[2]:.2f}; "
        f"at the end {load1[0]:.2f}, {load1[1]:.2f}, {load1[2]:.2f}.",
        f"Clients: {_versions()}, Python {sys.version.split()[0]}. Client CPU = this process's CPU "
        "(all threads) per call; server CPU = the Permify process's, per call (10 ms ticks over a block).",
    ]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m authzbench.systems.permify.tools.clients",
        description="Permify: each client's overhead against its transport's round trip")
    ap.add_argument("--checks", type=int, default=3000, help="checks in the fixed list (default: 3000)")
    ap.add_argument("--rounds", type=int, default=6, help="rounds the list is cut into (default: 6)")
    ap.add_argument("--warmup", type=int, default=100, help="untimed calls per client first (default: 100)")
    ap.add_argument("--profile", default="tiny", help="rebac dataset profile (default: tiny)")
    ap.add_argument("--provision", choices=["native", "compose", "external"])
    ap.add_argument("--data-dir", type=Path)
    ap.add_argument("--out", type=Path, default=Path("reports/permify-clients.md"), help="the table's file")
    return ap


def main(argv: list[str] | None = None) -> int:
    from authzbench.core.errors import BackendUnavailable, UserError

    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.argv = argv
    if args.checks < 1 or args.rounds < 1 or args.warmup < 0:
        print("permify_clients: --checks and --rounds must be >= 1, --warmup >= 0", file=sys.stderr)
        return 2
    try:
        return run(args)
    except UserError as e:
        print(f"permify_clients: error: {e}", file=sys.stderr)
        return 2
    except BackendUnavailable as e:
        print(f"permify_clients: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
