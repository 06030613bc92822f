"""The many-host runner on a loopback Dask cluster (2 Dask workers = 2 load hosts), against fake backends.

Skipped without the optional extra `authzbench[distributed]`."""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

import dask  # noqa: E402
import psutil  # noqa: E402

from authzbench.core.metrics import merge  # noqa: E402
from authzbench.core.records import as_dict  # noqa: E402
from authzbench.generator import generate  # noqa: E402
from authzbench.measure.distributed import run_phase_distributed  # noqa: E402
from authzbench.measure.runner import BackendFactory, PhaseSpec  # noqa: E402
from authzbench.report import render  # noqa: E402
from authzbench.report.core.data import phase_table  # noqa: E402
from authzbench.results.store import RunStore  # noqa: E402
from authzbench.truth.oracle import Oracle  # noqa: E402
from authzbench.workloads.catalog import SCENARIOS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    ds = generate("tiny", tmp_path_factory.mktemp("d") / "tiny")
    return ds, Oracle(ds)


@pytest.fixture(scope="module")
def client():
    # The arguments DISTRIBUTED.md found necessary: every listener on 127.0.0.1 (an empty dashboard host
    # binds 0.0.0.0), and daemon off so a Dask worker may start the load processes.
    with (dask.config.set({"distributed.worker.daemon": False, "distributed.worker.profile.enabled": False}),
          distributed.LocalCluster(
              n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
              dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0") as c,
          distributed.Client(c) as cl):
        yield cl


def _factory(ds, cls="authzbench.systems.reference.adapter:ReferenceBackend", **opts):
    return BackendFactory(cls, {}, {"dataset_path": str(ds.path), **opts})


def _run(client, spec, factory, inputs, **kw):
    recs: list[dict] = []
    res = run_phase_distributed(spec, factory, inputs, lambda r: recs.append(as_dict(r)), client, **kw)
    return res, recs


def _open(concurrency=4, rate=400.0, seconds=2.0):
    return PhaseSpec("flipping", "s", mode="open", concurrency=concurrency, stages=[(rate, seconds)],
                     start_rate=rate, warmup=8)


def test_open_loop_over_two_hosts_runs_every_scheduled_op_once_per_worker_id(client, tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_manage_direct_user"].sampler(ds, o, 200)
    spec = _open()
    res, recs = _run(client, spec, _factory(ds, "tests.unit.fakes:FlippingBackend"), inputs)
    row = phase_table(recs).iloc[0]
    assert res.status == "complete", res.reason
    assert res.scheduled == 800 and res.ops == 800 and res.dropped == 0
    assert row["ops"] == 800 and row["checked"] == 800
    assert merge(row["hists"]).get_total_count() == 800
    ivs = [r for r in recs if r["type"] == "interval"]
    host_of = {}
    for r in ivs:
        assert host_of.setdefault(r["worker"], r["host"]) == r["host"]  # a worker id lives on one host
    assert sorted(host_of) == [0, 1, 2, 3] and len(set(host_of.values())) == 2
    clock = next(r for r in recs if r["type"] == "clock")
    assert sorted(w for h in clock["hosts"] for w in h["workers"]) == [0, 1, 2, 3]  # each id handed out once
    # the planted wrong answers (resource id divisible by 7) of exactly the ops that ran are counted
    planted = sum(1 for k in range(800) if inputs[k % len(inputs)][1][2] % 7 == 0)
    assert planted > 0 and row["mismatches"] == planted


def test_closed_loop_over_two_hosts_counts_every_planted_mismatch(client, tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_manage_direct_user"].sampler(ds, o, 200)
    flipped = sum(1 for _, (u, p, r), _e in inputs if r % 7 == 0)
    spec = PhaseSpec("flipping", "s", concurrency=3, iterations=200)
    res, recs = _run(client, spec, _factory(ds, "tests.unit.fakes:FlippingBackend"), inputs)
    row = phase_table(recs).iloc[0]
    assert res.status == "complete", res.reason
    assert row["ops"] == 200 and row["mismatches"] == flipped > 0
    assert row["examples"][0]["args"][2] % 7 == 0


def test_a_host_clock_off_by_5_s_is_measured_and_its_start_corrected(client, tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_negative"].sampler(ds, o, 50)
    spec = _open(concurrency=2, rate=200.0, seconds=1.5)
    res, recs = _run(client, spec, _factory(ds), inputs, clock_skews={1: 5.0})
    hosts = next(r for r in recs if r["type"] == "clock")["hosts"]
    skewed, plain = hosts[1], hosts[0]
    assert abs(skewed["offset_ms"] - 5000) <= skewed["uncertainty_ms"] + 1
    assert abs(plain["offset_ms"]) <= plain["uncertainty_ms"] + 1
    assert skewed["start_margin_ms"] > 0  # it heard of the start before it came, on its own clock
    row = phase_table(recs).iloc[0]
    # Uncorrected, host 2 would start 4.5 s "late": every one of its ops would show ~4.5 s of latency.
    assert res.status == "complete" and res.ops == res.scheduled == 300
    assert row["max_ms"] < 1000


def test_the_report_shows_ops_latency_and_clock_offset_per_host(client, tiny, tmp_path):
    ds, o = tiny
    inputs = SCENARIOS["check_negative"].sampler(ds, o, 50)
    store = RunStore.create(tmp_path / "results")
    run_phase_distributed(
        _open(concurrency=2, rate=100.0, seconds=1.0), _factory(ds), inputs, store.append, client,
        clock_skews={0: -2.0})
    render(store.path, tmp_path / "reports")
    md = (tmp_path / "reports" / f"{store.path.name}-appendix.md").read_text()
    section = md[md.index("## Load hosts"):]
    hosts = next(r for r in store.records() if r["type"] == "clock")["hosts"]
    for h in hosts:
        assert f"| {h['host']} | check | 1 | 50 |" in section  # 100 ops/s for 1 s, half on each host
    assert f"| {hosts[0]['offset_ms']:,.0f} |" in section and round(hosts[0]["offset_ms"]) in range(
        -2002, -1997)


def test_bench_drives_the_agents_through_its_own_client(client, tiny):
    ds, _ = tiny
    # A fresh process, as `bench --workers-on` is: no other client that the actor handles could fall back on.
    code = f"""
from authzbench.measure.distributed import connect, host_versions, run_phase_distributed
from authzbench.measure.runner import BackendFactory, PhaseSpec
c = connect({client.scheduler.address!r})
hosts = sorted(host_versions(c)["hosts"])
inputs = [("check", (0, "view", r), False) for r in range(20)]
f = BackendFactory("authzbench.systems.reference.adapter:ReferenceBackend", {{}},
                   {{"dataset_path": {str(ds.path)!r}}})
res = run_phase_distributed(PhaseSpec("reference", "s", concurrency=2, iterations=40), f, inputs,
                            lambda r: None, c)
print(len(hosts), res.status, res.ops, res.reason)
c.close()
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.stdout.split()[:3] == ["2", "complete", "40"], r.stdout + r.stderr[-2000:]


def test_the_load_host_command_makes_a_loopback_worker_that_may_start_processes(client):
    sched = client.scheduler.address
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "authzbench.cli", "load-host", sched], env=env, cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        client.wait_for_workers(3, timeout=30)
        new = [a for a, w in client.scheduler_info()["workers"].items() if w.get("nthreads") == 1
               and _pid(client, a) == p.pid]
        assert len(new) == 1
        conf = client.run(lambda: (dask.config.get("distributed.worker.daemon"),
                                   dask.config.get("distributed.worker.profile.enabled")), workers=new)
        assert conf[new[0]] == (False, False)
        procs = [psutil.Process(), *psutil.Process().children(recursive=True)]
        listening = {(c.laddr.ip, c.laddr.port) for pr in procs for c in _inet(pr)
                     if c.status == psutil.CONN_LISTEN}
        assert len(listening) >= 6  # scheduler + dashboard, and each of 3 workers' comm + HTTP ports
        # loopback only; an earlier real-backend test's server in this session (a JVM) may show its
        # 127.0.0.1 as the IPv4-mapped ::ffff:127.0.0.1
        assert all(_loopback(ip) for ip, _ in listening), sorted(listening)
    finally:
        # Ctrl-C: the worker says goodbye to the scheduler first; in one full unit run on the busy machine
        # that took over 20 s (it takes ~1 s alone), so 60
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
    client.wait_for_workers(2, timeout=10)


def _inet(proc: psutil.Process) -> list:
    # a short-lived child (CI saw one end between children() and net_connections()) listens on nothing
    try:
        return proc.net_connections(kind="inet")
    except psutil.NoSuchProcess:
        return []


def _loopback(ip: str) -> bool:
    a = ipaddress.ip_address(ip)
    mapped = getattr(a, "ipv4_mapped", None)
    return a.is_loopback or (mapped is not None and mapped.is_loopback)


def _pid(client, addr):
    return client.run(os.getpid, workers=[addr])[addr]


def test_a_killed_load_host_marks_the_phase_incomplete(client, tiny):
    ds, o = tiny
    inputs = SCENARIOS["check_negative"].sampler(ds, o, 50)
    spec = _open(concurrency=2, rate=200.0, seconds=3.0)
    victim = sorted(client.scheduler_info()["workers"])[1]
    pid = _pid(client, victim)

    def on_window(opened: bool) -> None:
        if opened:  # one second into the measured window, the second host's Dask worker dies
            threading.Timer(1.0, os.kill, (pid, signal.SIGKILL)).start()

    t0 = time.perf_counter()
    res, recs = _run(client, spec, _factory(ds), inputs, on_window=on_window)
    assert res.status == "incomplete"
    assert "lost" in res.reason
    assert any(r["type"] == "host_lost" for r in recs)
    assert 0 < res.ops < res.scheduled  # the first host's ops still count
    assert time.perf_counter() - t0 < 30
    client.wait_for_workers(2, timeout=30)  # the nanny restarts it for whatever runs next


@pytest.mark.parametrize("args,message", [
    (["--backend", "postgres"], "--workers-on needs --provision external"),
    (["--backend", "clickhouse", "--provision", "external"], "in-process engine"),
])
def test_workers_on_refuses_what_cannot_be_spread_in_one_line(tmp_path, args, message):
    r = subprocess.run([sys.executable, "-m", "authzbench.cli", "bench", "--profile", "tiny", *args,
                        "--workers-on", "tcp://127.0.0.1:8786"], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert message in r.stderr.strip().splitlines()[-1]


def test_a_loopback_server_is_refused_when_a_load_host_is_another_machine():
    from authzbench.core.errors import UserError
    from authzbench.measure.distributed import check_endpoint, endpoint_hosts

    class _Client:
        def __init__(self, *workers):
            self.workers = workers

        def scheduler_info(self):
            return {"workers": {w: {} for w in self.workers}}

    assert endpoint_hosts("postgresql://u:pw@db1:5432,db2:5433/authz") == ["db1", "db2"]
    assert endpoint_hosts("host=localhost dbname=authz") == ["localhost"]
    remote = _Client("tcp://127.0.0.1:4000", "tcp://198.51.100.7:4001")  # a documentation-range address
    with pytest.raises(UserError, match="loopback"):
        check_endpoint(remote, "postgres", "postgresql://u@127.0.0.1:5432/authz")
    check_endpoint(remote, "postgres", "postgresql://u@198.51.100.9:5432/authz")  # a network address: fine
    check_endpoint(_Client("tcp://127.0.0.1:4000"), "postgres", "postgresql://u@localhost/authz")  # all local
