"""`authzbench crosscheck` without servers: the tools' output parsed into figures, the pgbench script picking
the sampled inputs with the adapter's own query, the runner's records read back, and the ratio table."""

from __future__ import annotations

import pytest

from authzbench.cli import main
from authzbench.core.metrics import encode, new_histogram
from authzbench.report.core.clientbound import MARK
from authzbench.systems.postgres.adapter import PostgresBackend, check_statement
from authzbench.tools.crosscheck import (
    case_tree,
    ghz_config,
    ours_from_records,
    parse_ghz,
    parse_pgbench,
    pgbench_command,
    pgbench_script,
    sides_in_order,
)
from authzbench.tools.crosscheck_report import (
    LIMIT,
    noise_lines,
    ratio_table,
    render,
    rows,
    throughput_verdict,
    verdict,
)


def _eval_case(expr: str, k: int) -> int:
    """pgbench's `case when :k < N then A else B end`, evaluated the way pgbench would."""
    tokens = expr.split()

    def walk(i: int) -> tuple[int, int]:
        if tokens[i] != "case":
            return int(tokens[i]), i + 1
        assert tokens[i + 1:i + 4] == ["when", ":k", "<"] and tokens[i + 5] == "then"
        bound = int(tokens[i + 4])
        a, j = walk(i + 6)
        assert tokens[j] == "else"
        b, j = walk(j + 1)
        assert tokens[j] == "end"
        return (a if k < bound else b), j + 1

    return walk(0)[0]


@pytest.mark.parametrize("n", [1, 2, 7, 1000])
def test_case_tree_gives_the_kth_input_for_every_k(n):
    values = [(i * 7919) % 100_003 for i in range(n)]
    expr = case_tree(values)
    assert [_eval_case(expr, k) for k in range(n)] == values


def test_case_tree_is_balanced_so_a_pick_costs_log_n_comparisons():
    expr = case_tree(list(range(2000)))
    depth = max_depth = 0
    for t in expr.split():
        depth += t == "case"
        depth -= t == "end"
        max_depth = max(max_depth, depth)
    assert max_depth == 11  # ceil(log2(2000))


def test_pgbench_script_runs_the_adapters_check_query_with_its_parameters_in_order():
    sql, params = check_statement("manage")
    script = pgbench_script(sql, params, [{"user": 5, "resource": 9}, {"user": 6, "resource": 10}])
    lines = script.splitlines()
    assert lines[0] == "\\set k random(0, 1)"
    assert lines[1].startswith("\\set resource ") and _eval_case(lines[1].split(" ", 2)[2], 1) == 10
    assert lines[2].startswith("\\set user ") and _eval_case(lines[2].split(" ", 2)[2], 0) == 5
    assert lines[3] == sql.replace("%s", ":resource", 1).replace("%s", ":user", 1) + ";"
    assert "%s" not in script


def test_check_statement_names_the_parameters_in_the_order_check_passes_them():
    from psycopg import pq

    from authzbench.systems.postgres.adapter import pq_placeholders

    class Result:
        status, ntuples = pq.ExecStatus.TUPLES_OK, 1

        def get_value(self, row, col):
            return b"\x01"

    class PGconn:  # libpq's calls the adapter makes: a statement prepared once per query, then run by name
        def __init__(self):
            self.prepared, self.seen = {}, None

        def prepare(self, name, query):
            self.prepared[name] = query
            return type("Ok", (), {"status": pq.ExecStatus.COMMAND_OK})()

        def exec_prepared(self, name, params, result_format=0):
            self.seen = (self.prepared[name], tuple(params), result_format)
            return Result()

    b = PostgresBackend({"dsn": "postgresql://unused"}, {})
    b.conn, b._watchdog, b._statements = type("Conn", (), {"pgconn": PGconn()})(), None, {}
    for perm in ("manage", "view", "view_content"):
        assert b.check(user=5, perm=perm, resource=9)
        sql, params = check_statement(perm)
        assert b.conn.pgconn.seen == (
            pq_placeholders(sql), tuple(b"%d" % {"user": 5, "resource": 9}[p] for p in params), 1)
    assert len(b.conn.pgconn.prepared) == 3  # prepared once each


PGBENCH_OUT = """pgbench (15.14 (Debian 15.14-0+deb12u1))
transaction type: check.sql
scaling factor: 1
query mode: prepared
number of clients: 8
number of threads: 8
maximum number of tries: 1
duration: 3 s
number of transactions actually processed: 4
number of failed transactions: 1 (20.000%)
latency average = 0.512 ms
initial connection time = 12.345 ms
tps = 2000.000000 (without initial connection time)
"""


def test_pgbench_figures_come_from_its_transaction_log_and_tps_line():
    log = ["0 0 400 0 1700000000 1", "0 1 500 0 1700000000 2", "1 0 600 0 1700000000 3",
           "1 1 10000 0 1700000000 4 55", "garbage"]
    m = parse_pgbench(PGBENCH_OUT, log)
    assert (m.ops, m.errors) == (4, 1)
    assert m.seconds == pytest.approx(4 / 2000)
    assert m.throughput == pytest.approx(2000)
    assert m.hist.get_value_at_percentile(50) == pytest.approx(500, rel=0.01)
    assert m.hist.get_max_value() == pytest.approx(10000, rel=0.01)


def test_pgbench_output_without_a_tps_line_is_refused():
    with pytest.raises(ValueError, match="tps"):
        parse_pgbench("pgbench: error: connection refused\n", [])


def test_ghz_figures_count_ok_requests_only_from_the_first_start_to_the_last_end():
    report = {"count": 4, "total": 9_000_000_000, "rps": 0.4, "details": [  # total: with the skipped warm-up
        {"timestamp": "2026-11-27T14:20:26.000000000Z", "latency": 1_000_000, "status": "OK", "error": ""},
        {"timestamp": "2026-11-27T15:20:26.5+01:00", "latency": 2_000_000, "status": "OK", "error": ""},
        {"timestamp": "2026-11-27T14:20:27.997000001Z", "latency": 3_000_000, "status": "OK", "error": ""},
        {"timestamp": "2026-11-27T14:20:27.000000000Z", "latency": 9_000_000, "status": "Unavailable",
         "error": "rpc error"}]}
    m = parse_ghz(report)
    assert (m.ops, m.errors) == (3, 1)
    assert m.seconds == pytest.approx(2.0, abs=1e-6)
    assert m.throughput == pytest.approx(1.5)
    assert m.hist.get_value_at_percentile(50) == pytest.approx(2000, rel=0.01)
    assert m.hist.get_max_value() == pytest.approx(3000, rel=0.01)


def _hist(*values_us: int) -> str:
    h = new_histogram()
    for v in values_us:
        h.record_value(v)
    return encode(h)


def test_our_figures_are_the_runners_check_intervals_and_phase_window():
    recs = [
        {"type": "interval", "phase": "p", "kind": "check", "hist": _hist(100, 200), "timeouts": 1,
         "errors": {"X": 2}},
        {"type": "interval", "phase": "p", "kind": "check", "hist": _hist(300), "timeouts": 0, "errors": {}},
        {"type": "interval", "phase": "other", "kind": "check", "hist": _hist(9000), "timeouts": 0,
         "errors": {}},
        {"type": "phase_end", "phase": "p", "ops": 3, "wall_s": 0.5}]
    m = ours_from_records(recs, "p")
    assert (m.ops, m.errors, m.seconds, m.throughput) == (3, 3, 0.5, 6.0)
    assert m.hist.get_max_value() == pytest.approx(300, rel=0.01)


def _rec(
    side: str, rnd: int, conc: int, p50_us: int, ops: int, seconds: float, backend: str = "postgres") -> dict:
    return {
        "type": "crosscheck", "backend": backend, "scenario": "check_negative", "concurrency": conc,
        "round": rnd, "side": side, "tool": "pgbench" if side == "theirs" else "authzbench",
        "hist": _hist(*[p50_us] * ops), "p50_ms": p50_us / 1000, "ops": ops, "errors": 0, "seconds": seconds,
        # the rest of a crosscheck record's fields (records.py), not read by these tests
        "phase": f"{backend}/check_negative/c{conc}/r{rnd}", "load": [0.0, 0.0, 0.0],
        "throughput": ops / seconds, "p95_ms": p50_us / 1000}


def test_ratio_rows_pool_the_rounds_and_divide_ours_by_theirs():
    recs = [_rec("theirs", 0, 1, 400, 10, 1.0), _rec("ours", 0, 1, 500, 10, 2.0),
            _rec("theirs", 1, 1, 400, 10, 1.0), _rec("ours", 1, 1, 600, 10, 2.0)]
    (r,) = rows(recs)
    assert (r.backend, r.concurrency, r.tool, r.rounds) == ("postgres", 1, "pgbench", 2)
    assert r.ours.throughput == pytest.approx(5.0) and r.theirs.throughput == pytest.approx(10.0)
    assert r.ratio("throughput") == pytest.approx(0.5)
    assert r.ratio("p95_ms") == pytest.approx(1.5, rel=0.01)  # pooled: ours' p95 is the 600 µs round
    assert r.p50_ratio_range == pytest.approx((1.25, 1.5))
    table = ratio_table([r])
    assert "| postgres | check_negative | 1 | pgbench |" in table and "(1.25-1.50)" in table


def test_a_phase_measured_by_one_side_only_has_no_row():
    assert rows([_rec("theirs", 0, 1, 400, 10, 1.0)]) == []


def test_verdict_names_each_1_worker_pair_over_the_limit_and_ignores_8_workers():
    over = [_rec("theirs", 0, 1, 400, 10, 1.0), _rec("ours", 0, 1, 800, 10, 1.0)]
    within = [_rec("theirs", 0, 1, 400, 10, 1.0, "openfga"), _rec("ours", 0, 1, 420, 10, 1.0, "openfga"),
              _rec("theirs", 0, 8, 400, 10, 1.0, "openfga"), _rec("ours", 0, 8, 4000, 10, 1.0, "openfga")]
    (line,) = verdict(rows(over + within))
    assert "on 1 of 2" in line and "postgres check_negative 2.00" in line and "openfga" not in line
    (line,) = verdict(rows(within))
    assert f"within {LIMIT:.2f}x" in line and "all 1" in line


def test_openfga_is_judged_over_grpc_as_ghz_sends_it_and_its_http_side_is_stated_apart():
    fga = [_rec("theirs", 0, 1, 400, 10, 1.0, "openfga"), _rec("ours", 0, 1, 900, 10, 1.0, "openfga"),
           _rec("ours-grpc", 0, 1, 440, 10, 1.0, "openfga")]
    pg = [_rec("theirs", 0, 1, 400, 10, 1.0), _rec("ours", 0, 1, 500, 10, 1.0)]
    judged, http = verdict(rows(fga + pg))
    assert ("on 1 of 2" in judged
            and "postgres check_negative 1.25" in judged
            and "openfga" not in judged.split(":")[-1])
    assert "(openfga: ours over gRPC" in judged
    assert http.startswith("Over HTTP") and "openfga check_negative 2.25" in http
    (only,) = verdict(rows(pg))  # no gRPC side anywhere: one line, as before
    assert only.startswith("At 1 worker our p50 is more than")


def test_the_tool_against_itself_tells_a_gap_beyond_its_own_spread_from_one_within_it():
    # postgres: the tool's runs 400 and 600 µs (spread 1.50), ours 1.25x: over the limit, within the noise.
    # openfga: the tool's runs 400 and 420 µs (1.05), ours 2x: beyond the noise.
    noisy = [_rec("theirs", 0, 1, 400, 10, 1.0), _rec("ours", 0, 1, 600, 10, 1.0),
             _rec("theirs", 1, 1, 600, 10, 1.0), _rec("ours", 1, 1, 600, 10, 1.0)]
    steady_ = [_rec("theirs", 0, 1, 400, 10, 1.0, "openfga"), _rec("ours", 0, 1, 840, 10, 1.0, "openfga"),
               _rec("theirs", 1, 1, 420, 10, 1.0, "openfga"), _rec("ours", 1, 1, 820, 10, 1.0, "openfga")]
    recs = noisy + steady_
    table, text = noise_lines(recs, rows(recs))[0], noise_lines(recs, rows(recs))[2]
    assert "| postgres | check_negative | pgbench | ours | 0.400, 0.600 | 1.50 |" in table
    assert "passes 1.15x on 1 of 2 pairs" in text
    assert (
        "Of the 2 pairs over 1.15x like for like, 1 is beyond the tool's own spread: openfga check_negative."
        in text)
    assert noise_lines(noisy[:2], rows(noisy[:2])) == []  # one run of the tool: no spread to show


def test_render_states_the_servers_tools_and_breakdown_from_the_records():
    recs = [
        {"type": "crosscheck_server", "backend": "postgres", "label": "PostgreSQL 15.14", "mode": "native",
         "consistency": "", "tool": "pgbench", "tool_version": "pgbench (PostgreSQL) 15.14"},
        {**_rec("theirs", 0, 1, 400, 10, 1.0), "command": "pgbench -n -M prepared", "load": [1.5, 1, 1]},
        {**_rec("ours", 0, 1, 500, 10, 1.0), "load": [2.5, 1, 1]},
        {"type": "crosscheck_breakdown", "backend": "postgres", "scenario": "check_negative",
         "adapter_p50_ms": 0.45, "driver_p50_ms": 0.43, "calls": 10}]
    text = render(
        {"run_id": "x", "config": {"seconds": 3, "rounds": 1}, "dataset": {"profile": "tiny"}}, recs)
    assert "`pgbench -n -M prepared`" in text and "PostgreSQL 15.14" in text
    assert "| postgres | check_negative | 0.500 | 0.450 | 0.430 | 0.400 | +0.050 | +0.020 | +0.030 |" in text
    assert "median 2.00, range 1.50-2.50" in text
    assert (
        "- postgres check_negative: ours 0.500 ms against pgbench's 0.400 ms (+0.100 ms): the runner around "
        "the "
        "call +0.050 ms, the adapter's own work +0.020 ms, the driver's call against pgbench's +0.030 ms."
    ) in " ".join(text.split())  # a long bullet folds at 160 characters


@pytest.mark.parametrize("argv, says", [
    (["--backend", "mongo"], "crosscheck speaks to postgres"),
    (["--scenario", "mixed"], "--scenario mixed: valid"),
    (["--profile", "huge"], "unknown profile"),
    (["--seconds", "0.5"], "--seconds"),
    (["--concurrency", "0"], "--concurrency"),
])
def test_bad_crosscheck_input_is_one_line_and_exit_2(argv, says, capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        raise SystemExit(main(["crosscheck", "--results-dir", str(tmp_path), *argv]))
    err = capsys.readouterr().err
    assert e.value.code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing started, nothing written


def test_a_committed_run_with_gzipped_records_renders_like_the_results_dir(tmp_path):
    import gzip
    import json

    from authzbench.tools.crosscheck_report import render_run

    recs = [_rec("theirs", 0, 1, 400, 10, 1.0), _rec("ours", 0, 1, 500, 10, 1.0)]
    manifest = {"run_id": "20261127-150000", "config": {"seconds": 3, "rounds": 1}}
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    for d in (plain, packed):
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps(manifest))
    (plain / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with gzip.open(packed / "records.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    a = render_run(plain, tmp_path / "a").read_text()
    b = render_run(packed, tmp_path / "b")
    assert b.name == "crosscheck-20261127-150000.md" and b.read_text() == a and "| 1.25 (1.25-1.25) |" in a


def test_ghz_runs_one_connection_per_worker_for_the_phase_or_a_warm_up_count(tmp_path):
    md = {"authorization": "Bearer k3y"}
    timed = ghz_config("a.B.C", "127.0.0.1:1", tmp_path / "r.json", md, 8, seconds=3)
    assert (timed["concurrency"], timed["connections"], timed["duration"], timed["duration-stop"]) == (
        8, 8, "3s", "wait")
    assert "total" not in timed and timed["reflect-metadata"] == md
    warm = ghz_config("a.B.C", "127.0.0.1:1", tmp_path / "r.json", md, 8, requests=34)
    assert warm["total"] == 34 and "duration" not in warm


def test_pgbench_runs_prepared_for_the_phase_or_a_warm_up_count(tmp_path):
    timed = pgbench_command(tmp_path / "pgbench", tmp_path / "s.sql", "DSN", 8, 3, tmp_path / "tx")
    assert timed[1:] == [
        "-n", "-M", "prepared", "-c", "8", "-j", "8", "-T", "3", "-f", str(tmp_path / "s.sql"), "-l",
        "--log-prefix", str(tmp_path / "tx"), "DSN"]
    warm = pgbench_command(
        tmp_path / "pgbench", tmp_path / "s.sql", "DSN", 8, 0, tmp_path / "w", transactions=5)
    assert warm[8:10] == ["-t", "5"]


def test_the_side_that_runs_first_on_a_phases_inputs_alternates_by_round():
    assert [sides_in_order(r) for r in range(3)] == [
        ("theirs", "ours"), ("ours", "theirs"), ("theirs", "ours")]


def test_a_later_run_replaces_the_backends_it_measured_again(tmp_path):
    import json

    from authzbench.tools.crosscheck_report import render_run

    first = [_rec("theirs", 0, 1, 400, 10, 1.0), _rec("ours", 0, 1, 500, 10, 1.0),
             _rec("theirs", 0, 1, 400, 10, 1.0, "permify"), _rec("ours", 0, 1, 100, 10, 1.0, "permify")]
    again = [_rec("theirs", 0, 1, 400, 10, 1.0, "permify"), _rec("ours", 0, 1, 440, 10, 1.0, "permify")]
    for name, recs in (("a", first), ("b", again)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(json.dumps({"run_id": name, "config": {}}))
        (tmp_path / name / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    text = render_run([tmp_path / "a", tmp_path / "b"], tmp_path / "out").read_text()
    assert "| permify | check_negative | 1 | pgbench | ours | 0.440 |" in text and "| 0.100 |" not in text
    assert ("| postgres | check_negative | 1 | pgbench | ours | 0.500 |" in text
            and "measured again in b (permify)" in text)


def _server(backend: str = "openfga", tier: str = "strict") -> dict:
    from authzbench.provision.tiers import engine_tier

    return {"type": "crosscheck_server", "backend": backend, "label": "OpenFGA v1.22.1", "mode": "native",
            "consistency": "HIGHER_CONSISTENCY", "tool": "ghz", "tool_version": "0.120.0",
            "settings": engine_tier(backend, tier).settings}


def test_render_states_the_tier_asked_for_and_each_engines_recorded_cache_and_reads():
    recs = [
        _server(), {**_rec("theirs", 0, 1, 400, 10, 1.0, "openfga"), "command": "ghz", "load": [0.5, 1, 1]},
        {**_rec("ours", 0, 1, 500, 10, 1.0, "openfga"), "load": [0.5, 1, 1]}]
    text = render({"run_id": "x", "config": {"seconds": 3, "tier": "strict"}}, recs)
    assert "- Tier: strict." in text
    assert "openfga in the strict tier: answer cache off (check query and iterator caches); reads " \
           "HIGHER_CONSISTENCY" in " ".join(text.split())
    old = render({"run_id": "x", "config": {"seconds": 3}}, recs)
    assert "Tier: not recorded (runs before --tier ran cached" in " ".join(old.split())


@pytest.mark.parametrize("start, warned", [(2.5, True), (1.5, False)])
def test_a_run_started_with_a_load_above_the_cores_is_warned_about(start, warned):
    recs = [{**_rec("theirs", 0, 1, 400, 10, 1.0), "load": [0.7, 1, 1]},
            {**_rec("ours", 0, 1, 500, 10, 1.0), "load": [3.0, 1, 1]}]
    manifest = {"run_id": "x", "config": {"seconds": 3}, "environment": {"cpu_logical": 2},
                "load_at_start": [start, 1, 1]}
    text = " ".join(render(manifest, recs).split())
    assert f"1-minute load average at the start: {start:.2f} on 2 logical CPUs." in text
    assert "median 1.85, range 0.70-3.00" in text
    assert ("WARNING: the run started with a 1-minute load average of " in text) is warned


def test_a_run_without_a_recorded_start_load_takes_its_first_runs():
    recs = [{**_rec("theirs", 0, 1, 400, 10, 1.0), "load": [18.4, 1, 1]},
            {**_rec("ours", 0, 1, 500, 10, 1.0), "load": [1.0, 1, 1]}]
    text = " ".join(render({"run_id": "x", "config": {}, "environment": {"cpu_logical": 2}}, recs).split())
    assert "at the first run: 18.40 on 2 logical CPUs" in text and "WARNING" in text


def test_render_states_the_warm_up_both_sides_got_and_the_recorded_commit():
    recs = [{**_rec("theirs", 0, 1, 400, 10, 1.0), "warmup": 1200},
            {**_rec("ours", 0, 1, 500, 10, 1.0), "warmup": 1200}]
    env = {"source": {"commit": "a1f8a01", "dirty": True}}
    text = " ".join(render({"run_id": "x", "config": {}, "environment": env}, recs).split())
    assert "Warm-up: every phase, on both sides, ran 1,200 unmeasured ops" in text
    assert "Code: commit `a1f8a01`, with uncommitted changes." in text
    assert "Warm-up" not in render({"run_id": "x", "config": {}}, recs[:0] + [_rec("ours", 0, 1, 5, 1, 1.0)])


def test_the_manifest_records_the_checkouts_commit_and_whether_it_was_dirty(tmp_path):
    import subprocess

    from authzbench.results.store import source_commit

    assert source_commit(tmp_path) == {"commit": "unknown", "dirty": None}  # not a git checkout
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "f").write_text("1")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "m"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert source_commit(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "f").write_text("2")
    assert source_commit(tmp_path) == {"commit": head, "dirty": True}


def test_the_manifests_environment_carries_the_commit():
    from authzbench.results.store import environment

    assert set(environment()["source"]) == {"commit", "dirty"}


def test_tier_is_parsed_and_passed_to_the_plan(monkeypatch, tmp_path):
    import authzbench.tools.crosscheck as cc

    seen = {}
    monkeypatch.setattr(
        cc, "run_command", lambda plan, *a: seen.setdefault("plan", plan) and tmp_path / "r.md")
    assert (
        main(["crosscheck", "--tier", "strict", "--provision", "native", "--results-dir", str(tmp_path)]) == 0
    )
    assert seen["plan"].tier == "strict"
    seen.clear()
    main(["crosscheck", "--results-dir", str(tmp_path)])
    assert seen["plan"].tier == "cached"


@pytest.mark.parametrize("argv, says",
                         [(["--tier", "loose"], "--tier"),
                          (["--tier", "strict", "--provision", "external", "--backend", "openfga"],
                           "--tier strict needs --provision native")])
def test_a_bad_or_unrunnable_tier_is_refused_before_anything_is_written(
    argv, says, capsys, tmp_path, monkeypatch):
    # an external server named, never reached
    monkeypatch.setenv("AUTHZBENCH_OPENFGA_URL", "http://127.0.0.1:1")
    with pytest.raises(SystemExit) as e:
        raise SystemExit(main(["crosscheck", "--results-dir", str(tmp_path), *argv]))
    err = capsys.readouterr().err
    assert e.value.code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_openfga_over_http_and_grpc_is_a_table_of_its_own_with_the_transports_cost():
    recs = [{**_rec("theirs", 0, 1, 400, 10, 1.0, "openfga"), "command": "ghz"},
            _rec("ours", 0, 1, 1000, 10, 1.0, "openfga"),
            {"type": "crosscheck_breakdown", "backend": "openfga", "scenario": "check_negative",
             "adapter_p50_ms": 0.9, "driver_p50_ms": 0.7, "grpc_p50_ms": 0.45, "calls": 10},
            _rec("theirs", 0, 1, 400, 10, 1.0), _rec("ours", 0, 1, 500, 10, 1.0),
            {"type": "crosscheck_breakdown", "backend": "postgres", "scenario": "check_negative",
             "adapter_p50_ms": 0.45, "driver_p50_ms": 0.43, "calls": 10}]
    text = render({"run_id": "x", "config": {}}, recs)
    assert "## OpenFGA over HTTP and over gRPC at 1 worker" in text
    assert "| openfga | check_negative | 1.000 | 0.900 | 0.700 | 0.450 | 0.400 | +0.250 | +0.050 |" in text
    # no gRPC: no row
    assert "| postgres | check_negative | 0.500 | 0.450 | 0.430 | 0.400 | +0.250" not in text
    no_grpc = [r for r in recs if r.get("backend") != "openfga"]
    assert "over gRPC" not in render({"run_id": "x", "config": {}}, no_grpc)


def test_the_breakdown_times_a_grpc_call_in_turn_and_a_failed_call_stops_it(monkeypatch):
    import authzbench.tools.crosscheck_client as cc

    class Fake:
        def check(self, *a: object) -> bool:
            return True

    calls: list[str] = []
    monkeypatch.setattr(cc, "bare_driver_call", lambda b, n, a: (lambda: calls.append("driver")))
    inputs = [(0, (1, "manage", 2), True)] * 6
    got = cc.breakdown(Fake(), "openfga", inputs, 6, lambda a: (lambda: calls.append("grpc")))
    assert set(got) == {"adapter_p50_ms", "driver_p50_ms", "grpc_p50_ms", "calls"} and got["calls"] == 6
    # adapter-driver-grpc, driver-grpc-adapter, grpc-adapter-driver: which goes first rotates by input
    assert calls.count("grpc") == 6 and calls[:6] == ["driver", "grpc", "driver", "grpc", "grpc", "driver"]
    assert "grpc_p50_ms" not in cc.breakdown(Fake(), "openfga", inputs, 2)

    def fail() -> None:
        raise RuntimeError("UNAVAILABLE")

    with pytest.raises(RuntimeError):
        cc.breakdown(Fake(), "openfga", inputs, 2, lambda a: fail)


def _cpu_rec(side: str, conc: int, ops: int, client_ms: float | None, server_ms: float | None,
             backend: str = "postgres") -> dict:
    return {
        **_rec(side, 0, conc, 400, ops, 1.0, backend), "client_cpu_ms": client_ms, "server_cpu_ms": server_ms}


def test_throughput_under_half_the_tools_is_client_bound_when_our_client_took_40_percent_of_a_saturated_machine():  # noqa: E501
    # 20 ops/s x (40 + 60 ms) = 2 core-s a second on 2 cores; the server took more than our client (the old
    # rule: "not client-bound ... the gap is not our client's CPU")
    recs = [_cpu_rec("theirs", 1, 10, 0.01, 0.05), _cpu_rec("ours", 1, 10, 0.2, 0.05),
            _cpu_rec("theirs", 8, 100, 1.0, 50.0), _cpu_rec("ours", 8, 20, 40.0, 60.0)]
    head, line, blank = throughput_verdict(rows(recs), cores=2)
    assert "on 1 of 1 rows" in head and blank == ""
    assert "postgres check_negative at 8 (ours): 0.20x pgbench's" in line
    assert f"{MARK} client-bound: the machine 100% busy, our client 40% of it (40.0000 ms" in line
    assert "the server alone on the 2 cores: up to 33/s" in line  # 2 x 1000 / 60 ms
    # 2000 / 61
    assert "with the tool's client CPU (1.0000 ms per op) the same server CPU predicts 33/s" in line
    text = render({"environment": {"cpu_logical": 2}}, recs)
    assert f"{MARK} client-bound: the machine 100% busy" in text and "gap is not our client" not in text
    assert "| 100% | 40% | 20 | 33 | ◐ yes |" in text


def test_low_throughput_on_an_unsaturated_machine_or_with_a_small_client_share_is_not_flagged():
    recs = [_cpu_rec("theirs", 8, 100, 0.01, 0.05, "openfga"), _cpu_rec("ours", 8, 20, 30.0, 30.0, "openfga"),
            _cpu_rec("theirs", 8, 100, 0.01, 0.05, "spicedb"), _cpu_rec("ours", 8, 20, 10.0, 90.0, "spicedb"),
            _cpu_rec("theirs", 8, 100, None, None), _cpu_rec("ours", 8, 20, None, None)]
    _, fga, spice, pg, _ = throughput_verdict(rows(recs), cores=2)
    assert (
        "not client-bound (under 75% busy): the machine 60% busy, our client 50%" in fga and MARK not in fga)
    assert "not client-bound (our client under 25% of it): the machine 100% busy, our client 10%" in spice
    assert "not flagged: the run recorded no client and server CPU apart" in pg
    assert "not judged: the run recorded no core count" in throughput_verdict(rows(recs))[1]


def test_throughput_at_least_half_the_tools_is_not_listed_and_one_worker_alone_says_nothing():
    fine = [_cpu_rec("theirs", 8, 100, 0.01, 0.05), _cpu_rec("ours", 8, 50, 0.2, 0.05)]
    assert throughput_verdict(rows(fine)) == [
        "At the most workers, like for like, our throughput is under 0.5x the tool's on 0 of 1 rows.", ""]
    assert (
        throughput_verdict(rows([_cpu_rec("theirs", 1, 10, 0.01, 0.05), _cpu_rec("ours", 1, 1, 0.2, 0.05)]))
        == [])


def test_openfgas_throughput_is_judged_over_grpc_and_its_low_http_side_is_listed_apart():
    recs = [_cpu_rec("theirs", 8, 100, 0.01, 0.05, "openfga"), _cpu_rec("ours", 8, 40, 0.02, 0.05, "openfga"),
            {**_cpu_rec("ours", 8, 80, 0.02, 0.05, "openfga"), "side": "ours-grpc"}]
    head, http, line, blank = throughput_verdict(rows(recs))
    assert "like for like" in head and "on 0 of 1 rows." in head and blank == ""
    assert http.startswith("Over HTTP") and "openfga check_negative at 8 (ours): 0.40x" in line
