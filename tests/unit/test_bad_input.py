"""Every option of every subcommand, walked from the argparse parser itself, refuses its bad values the same
way: exit code 2, exactly one line on stderr naming the option, no traceback, and nothing started or
written (no dataset generated, no server, no results directory, no report).

A new option without a row in BAD or EXEMPT fails `test_every_option_has_a_row`, so it cannot be forgotten.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from authzbench import cli, config
from authzbench.run import orchestrate, servers

# Values are given as `--opt=value`. "{file}" is a regular file in the test's directory (so "{file}/x" is a
# path below a file), "{missing}" a path that does not exist.
DATASET = {
    "--profile": ["huge", ""],
    "--set": ["orgs=0", "orgs=-1", "orgs", "=3", "colour=blue", "orgs=abc", "pareto_alpha=nan", ""],
    "--seed": ["-1", "abc", "1.5", ""],
    "--model": ["graph", ""],
    "--data-dir": ["", "{file}", "{file}/x"],
}
BACKEND = {
    "--backend": ["oracledb", "", "cockroach", "spicedb-crdb", "postgres,,mongo", "postgres,postgres",
                  "spicedb-pg@1.57", "postgres@v17.2.0", "spicedb-pg@v1.57.1,spicedb-pg@v1.57.1"],
    "--provision": ["kubernetes", ""],
    "--consistency": ["eventual", ""],
    "--tier": ["eventual", "", "STRICT"],
    # a key twice: test_repeated_items
    "--option": ["bulk_docs", "no_such_knob=1", "batch_rows=abc", "=5", ""],
    "--ingest-variants": ["", "NoSuchPath"],
    "--max-load-minutes": ["0", "-1", "abc", "nan"],
}
BENCH = {
    "--scenario": ["nope", "", "social_view_content", "mixed,mixed"],
    "--concurrency": ["0", "-1", "abc", "", "1,,8", "1.5", "100000", "8,1,8"],
    "--write-concurrency": ["0", "-1", "abc", "", "1,,8", "100000", "1,1"],
    "--iterations-scale": ["0", "-1", "abc", "nan", "inf", ""],
    "--repeat": ["0", "-1", "abc", "1000000", ""],
    "--rounds": ["0", "-1", "abc", "21", ""],
    "--visits": ["0", "abc", "4", ""],  # 4 visits of 3 rounds: a visit without a round
    "--max-reruns": ["-1", "abc", "11", ""],
    "--disturbed-cpu": ["0", "-5", "abc", "nan", "", "1e6"],  # above every core's 100%: test_disturbed_cpu
    "--write-share": ["-0.1", "2", "abc", "nan", ""],
    "--write-kind": ["everything", "", "ACL"],
    "--profiles": ["", "huge", "tiny,,baseline"],
    "--scale": ["", "0", "-1", "abc", "7"],
    "--extend-sweep": ["", "{missing}", "{file}"],
    "--shape": ["", "depth", "depth=1,2", "width=1,2,3", "acl=0,1,2", "depth=1,x,3", "depth=1,2,30"],
    "--workers-on": ["", "localhost:8786", "http://10.0.0.1:8786", "tcp://10.0.0.1", "tcp://a b:1"],
    "--rate": ["0", "-5", "abc", "nan", "inf", "1e15", ""],
    "--stage": ["100:-5", "100:0", "-1:5", "100", "abc:5", "100:nan", "1e15:10", ""],
    "--rates": ["0", "-1", "100,,500", "abc", "1e15", "", "100,100"],
    "--churn-rates": ["0", "-1", "1,,10", "abc", "inf", "", "10,1", "1,1"],
    "--churn-read-rate": ["0", "-1", "abc", "nan", "inf", ""],
    "--churn-step": ["0", "-1", "abc", "nan", ""],
    "--churn-writers": ["0", "-1", "abc", "1.5", ""],
    "--churn-freshness": ["0", "-1", "abc", "inf", ""],
    "--duration": ["-1", "0", "abc", "nan", "inf", ""],
    "--dau": ["0", "-1", "2", "nan", ""],
    "--slo-check-p95": ["-1", "0", "abc", "nan", ""],
    "--slo-write-p95": ["-1", "0", "abc", "inf", ""],
    "--slo-success": ["5", "-1", "0", "abc", "nan", ""],
    "--results-dir": ["", "{file}", "{file}/x"],
    "--report-dir": ["", "{file}", "{file}/x"],
    "--target-qps": ["0", "-1", "abc", "nan", "inf", "1.5x", ""],
    "--target-relationships": ["0", "-5", "abc", "nan", "M", ""],
}
BAD: dict[str, dict[str, list[str]]] = {
    "generate": {**DATASET, "--out": ["", "{file}", "{file}/x"], "--like": ["", "{missing}", "{file}"],
                 "--scale": ["0", "-1", "abc", "1.5", "", "2"]},
    "stats": {**DATASET, "--path": ["", "{missing}", "{file}"]},
    "import": {"--format": ["", "zanzibar"], "--path": ["", "{missing}", "{file}"],
               "--mapping": ["", "{missing}", "{file}"],
               "--out": ["", "{file}/x"], "--data-dir": ["", "{file}", "{file}/x"]},
    "prepare": {**DATASET, **BACKEND, "--dataset": ["", "{missing}", "{file}"]},
    "bench": {**DATASET, **BACKEND, **BENCH, "--dataset": ["", "{missing}", "{file}"]},
    "report": {
        "run": ["", "{missing}", "{file}"], "--compare": ["{missing}"], "--results-dir": ["", "{missing}"],
        "--out": ["", "{file}/x"]},
    "up": {"backend": ["oracledb", "", "cockroach", "spicedb-crdb", "spicedb-pg@v1.57", "postgres@v17.2.0"],
           "--provision": ["kubernetes", ""],
           "--tier": ["eventual", ""]},
    "down": {"backend": ["", "oracledb"], "--provision": ["kubernetes"]},
    "loadtest": {
        "--backend": ["nosuch"], "--profile": ["nosuch"], "--variant": ["nope"], "--scale": ["0", "x"],
        "--threads": ["0"], "--data-dir": ["{file}/x"], "--results-dir": ["{file}/x"],
        "--report-dir": ["{file}/x"]},
    "basis": {"run": ["", "{missing}", "{file}"], "--out": ["", "{file}", "{file}/x"]},
    "plan": {"results_dir": ["", "{missing}", "{file}"], "--qps": ["0", "-1", "abc", "nan", "inf", "5x", ""],
             "--relationships": ["0", "-5", "abc", "1e400", ""], "--write-share": ["-0.1", "2", "nan", ""],
             "--lookup-share": ["-1", "2", "abc", "0.995"], "--utilization": ["0", "1.5", "abc", "nan", ""],
             "--backend": ["nosuch", "", "postgres,,x"]},
    "decide": {"--relationships": ["0", "abc", "1G", ""], "--checks": ["0", "-5", "abc"],
               "--changes": ["-1", "abc", "nan"],
               "--change-mix": ["membership=0.5", "acl=1", "membership=2", ""],
               "--lookups": ["-1", "abc"], "--freshness": ["sometimes", "bounded", "bounded:-1", "bounded:x"],
               "--check-p95-ms": ["0", "-1", "abc"], "--budget": ["0", "abc", "1"],
               "--max-cores": ["0", "1.5"],
               "--backend": ["nosuch", "", "postgres,,x"], "--provision": ["kubernetes"],
               "--max-load-minutes": ["0", "abc"], "--iterations-scale": ["0", "abc"],
               "--data-dir": ["{file}/x"], "--results-dir": ["{file}/x"], "--report-dir": ["{file}/x"]},
    "load-host": {"scheduler": ["", "nonsense", "tcp://10.0.0.1"], "--host": ["", "a b"], "--name": [""]},
    "engine": {"action": ["start", ""]},
    "crosscheck": {
        "--backend": ["mongo", "", "postgres,,openfga", "reference", "postgres,postgres"],
        "--profile": ["huge", ""], "--scenario": ["mixed", "", "nope", "lookup_resources_view_regular"],
        "--concurrency": ["0", "abc", "", "1,,8", "100000", "1,1"], "--rounds": ["0", "21", "abc"],
        "--seconds": ["0", "1.5", "abc", "601"], "--breakdown-calls": ["-1", "abc"],
        "--provision": ["kubernetes"], "--tier": ["eventual", "", "STRICT"], "--data-dir": ["{file}/x"],
        "--results-dir": ["{file}/x"], "--report-dir": ["{file}/x"], "--render": ["{missing}", "", "{file}"]},
}
EXEMPT = {
    ("prepare", "--reload"): "a flag: present or absent, no value to get wrong",
    ("bench", "--reload"): "a flag",
    ("bench", "--keep-running"): "a flag",
    ("bench", "--no-report"): "a flag",
    ("bench", "--pin"): "a flag",
    ("bench", "--full-curve"): "a flag",
    ("perf", "--quick"): "a flag",
    ("import", "--drop-unmapped"): "a flag (what it keeps going past: test_import.py)",
    ("import", "--anonymize"): "a flag (what it hides: test_import.py)",
    ("decide", "--plan-only"): "a flag: present or absent",
    ("plan", "--against-tiers"): "a flag (with --qps or --relationships it is refused: test_capacity)",
    ("prepare", "--local-images"): "a flag; without --provision compose it is refused (test_compose.py)",
    ("bench", "--local-images"): "a flag; without --provision compose it is refused (test_compose.py)",
    ("up", "--local-images"): "a flag; without --provision compose it is refused (test_compose.py)",
    ("down", "--local-images"): "a flag; without --provision compose it is refused (test_compose.py)",
    ("report", "--no-against-reference"): "a flag (and its --against-reference twin)",
    ("bench", "--no-against-reference"): "a flag (and its --against-reference twin)",
}
# The options a valid command line needs, so that only the value under test is wrong.
RUN = str(Path(__file__).parent / "capacity_run")  # a small results dir of fixture records (test_capacity)
BASE = {"basis": [RUN], "plan": ["--qps=1000", "--relationships=1M", RUN],
        "decide": ["--relationships=20M", "--checks=1000", "--changes=10"],
        "prepare": ["--backend=reference", "--profile=tiny"],
        "bench": ["--backend=reference", "--profile=tiny", "--concurrency=1", "--iterations-scale=0.01"],
        "generate": ["--profile=tiny"], "stats": ["--profile=tiny"],
        "import": ["--format=reference-csv", "--path=.", "--out=x"],
        "loadtest": ["--backend=reference", "--profile=tiny"],
        "crosscheck": ["--backend=postgres", "--profile=tiny"]}


def parser_options() -> set[tuple[str, str]]:
    """(subcommand, option) for every option and positional of every subcommand, help excluded."""
    out = set()
    for action in cli.build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for cmd, sub in action.choices.items():
                for a in sub._actions:
                    if not isinstance(a, argparse._HelpAction):
                        out.add((cmd, a.option_strings[-1] if a.option_strings else a.dest))
    return out


def test_every_option_has_a_row():
    rows = {(cmd, opt) for cmd, opts in BAD.items() for opt in opts} | set(EXEMPT)
    assert parser_options() - rows == set(), "options without bad values or an exemption"
    assert rows - parser_options() == set(), "rows for options the parser no longer has"


CASES = [pytest.param(cmd, opt, value, id=f"{cmd} {opt}={value!r}")
         for cmd, opts in BAD.items() for opt, values in opts.items() for value in values]


class Started(BaseException):
    """Raised by whatever would generate, start or record: the bad value got through."""


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """cwd and every default directory inside tmp_path; generating, starting or recording raises Started."""
    monkeypatch.chdir(tmp_path)
    for var, sub in (
        ("AUTHZBENCH_STATE", "state"), ("AUTHZBENCH_DATA", "data"), ("AUTHZBENCH_RESULTS", "results")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.delenv("AUTHZBENCH_POSTGRES_URL", raising=False)

    def started(what):
        def fail(*a, **k):
            raise Started(what)
        return fail

    import authzbench.generator
    import authzbench.results.store

    monkeypatch.setattr(authzbench.generator, "_write_atomically", started("a dataset was generated"))
    monkeypatch.setattr(orchestrate, "Session", started("a server was started"))
    monkeypatch.setattr(servers, "Session", started("a server was started"))
    monkeypatch.setattr(servers, "provision", started("a server was started"))
    monkeypatch.setattr(
        authzbench.results.store.RunStore, "create", started("a results directory was created"))
    (tmp_path / "afile").write_text("not a directory")
    return tmp_path


def _argv(cmd: str, opt: str, value: str, root) -> list[str]:
    value = value.replace("{file}", str(root / "afile")).replace("{missing}", str(root / "missing"))
    base = [a for a in BASE.get(cmd, []) if not a.startswith(opt + "=")]
    if not opt.startswith("-"):
        return [cmd, *base, value]
    if opt == "--compare":
        return [cmd, opt, value, value]
    return [cmd, *base, f"{opt}={value}"]


def run_main(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as e:  # argparse's own refusals
        return int(e.code or 0)


@pytest.mark.parametrize("cmd,opt,value", CASES)
def test_bad_value_is_refused_in_one_line_before_anything_starts(sandbox, capsys, cmd, opt, value):
    argv = _argv(cmd, opt, value, sandbox)
    code = run_main(argv)
    out, errtext = capsys.readouterr()
    lines = [ln for ln in errtext.splitlines() if ln.strip()]
    assert code == 2, (argv, errtext)
    assert len(lines) == 1, (argv, lines)
    assert "error" in lines[0] and "Traceback" not in errtext
    name = opt.lstrip("-")
    shown = value.replace("{file}", str(sandbox / "afile")).replace("{missing}", str(sandbox / "missing"))
    assert name in lines[0] or (len(shown) > 3 and shown.split("/x")[0] in lines[0]), (argv, lines[0])
    assert sorted(p.name for p in sandbox.iterdir()) == ["afile"], "something was written"


def test_the_issue_s_command_lines_are_refused_by_the_real_cli(tmp_path):
    """The exact command lines of the issue, through a real process: exit 2, one line, nothing written."""
    env_dirs = {"AUTHZBENCH_STATE": "state", "AUTHZBENCH_DATA": "data", "AUTHZBENCH_RESULTS": "results"}
    import os

    env = {**os.environ, **{k: str(tmp_path / v) for k, v in env_dirs.items()}}
    for args in (
        ["--rate", "-5"], ["--rate", "0"], ["--duration", "-1"], ["--stage", "100:-5"], ["--rates", "0"],
        ["--slo-check-p95", "-1"], ["--slo-success", "5"], ["--concurrency", "100000"],
        ["--backend", "cockroach"], ["--backend", "spicedb-crdb"],
        ["--model", "social", "--backend", "scylla"]):
        r = subprocess.run([sys.executable, "-m", "authzbench.cli", "bench", *args], capture_output=True,
                           text=True, cwd=tmp_path, env=env, timeout=120)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1 and args[0] in lines[0], (args, r.stderr)
        assert list(tmp_path.iterdir()) == [], (args, list(tmp_path.iterdir()))


def test_concurrency_beyond_the_machine_says_the_limit_and_why(sandbox, capsys):
    asked = config.max_workers() * 2 + 10  # free memory moves a little between two readings
    assert run_main(["bench", *BASE["bench"], f"--concurrency=1,{asked}"]) == 2
    line = capsys.readouterr().err.strip()
    limit = int(re.search(r"at most ([\d,]+) workers can run here", line).group(1).replace(",", ""))
    assert 1 <= limit < asked and "MiB of memory is available" in line, line


def test_generate_honours_data_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_main(["generate", "--profile=tiny", "--data-dir", str(tmp_path / "mine")]) == 0
    made = list((tmp_path / "mine").iterdir())
    assert [p.name for p in made] == ["rebac-tiny-s42"] or len(made) == 1
    assert not (tmp_path / "data").exists()


def test_concurrency_beyond_the_native_postgres_connection_limit_is_refused(sandbox, capsys):
    from authzbench.provision.pgcluster import BENCH_SETTINGS

    too_many = int(BENCH_SETTINGS["max_connections"])
    code = run_main(["bench", "--backend=postgres", "--provision=native", "--profile=tiny",
                     f"--concurrency={too_many}"])
    line = capsys.readouterr().err.strip()
    assert code == 2 and f"max_connections={too_many}" in line and "\n" not in line, line


@pytest.mark.parametrize("argv", [
    ["bench", "--backend=spicedb-pg", "--profile=tiny", "--tier=strict", "--consistency=minimize_latency"],
    ["prepare", "--backend=openfga", "--profile=tiny", "--tier=strict", "--provision=external",
     "--option=url=http://127.0.0.1:1"],
], ids=["strict with a latency-first consistency", "strict on a server the suite did not start"])
def test_a_strict_tier_that_cannot_hold_is_refused_in_one_line_before_anything_starts(sandbox, capsys, argv):
    code = run_main(argv)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "--tier strict" in lines[0], lines
    assert sorted(p.name for p in sandbox.iterdir()) == ["afile"], "something was written"


@pytest.mark.parametrize("argv,visits", [(["--rounds=1"], 1), ([], 2), (["--rounds=1", "--repeat=2"], 2)])
def test_one_round_alone_is_accepted_and_visits_each_backend_once(sandbox, monkeypatch, argv, visits):
    """`--rounds 1` was refused ("--visits must be between 1 and ...") because visits defaulted to 2."""
    from authzbench import commands

    seen = []
    real = commands._config
    monkeypatch.setattr(commands, "_config", lambda args: seen.append(cfg := real(args)) or cfg)
    with pytest.raises(Started):
        run_main(["bench", *BASE["bench"], *argv])
    assert seen[0].schedule.visits == visits


@pytest.mark.parametrize("argv,shown", [
    (["--backend=postgres", "--backend=mongo,postgres"], "--backend: postgres"),
    (["--set=orgs=3", "--set=orgs=4"], "--set: orgs"),
    (["--option=batch_rows=5", "--option=batch_rows=6"], "--option: batch_rows"),
], ids=["a backend in two --backend", "a --set key twice", "an --option key twice"])
def test_repeated_items_across_repeatable_options_are_refused_in_one_line(sandbox, capsys, argv, shown):
    """`--backend postgres,postgres` started a run measuring postgres twice; a KEY=VALUE given twice kept
    only the last value."""
    code = run_main(["bench", "--profile=tiny", "--concurrency=1", *argv])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and shown in lines[0] and "more than once" in lines[0], lines
    assert sorted(p.name for p in sandbox.iterdir()) == ["afile"], "something was written"


@pytest.mark.parametrize("cores,value,refused", [(2, "200", True), (2, "500", True), (2, "199", False),
                                                 (8, "500", False)])
def test_disturbed_cpu_the_machine_cannot_show_is_refused(
    sandbox, capsys, monkeypatch, cores, value, refused):
    """Foreign CPU is summed over processes in % of one core: with 2 cores it never exceeds 200, so a
    threshold of 200 or more turned interference detection off without a word."""
    monkeypatch.setattr(config.psutil, "cpu_count", lambda logical=True: cores)
    argv = ["bench", *BASE["bench"], f"--disturbed-cpu={value}"]
    if not refused:
        with pytest.raises(Started):
            run_main(argv)
        return
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()] if run_main(argv) == 2 else []
    assert len(lines) == 1 and f"{cores} logical cores" in lines[0] and "--disturbed-cpu" in lines[0], lines
