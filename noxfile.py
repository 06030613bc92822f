"""Task sessions. Every session runs in one project venv under the cache dir
($AUTHZBENCH_CACHE/venv, default ~/.cache/authzbench/venv), created and updated on demand, so
`nox -s bench` works from any nox and installs nothing outside the cache dir.

    nox -s prepare -- --backend postgres     generate, start and load (servers keep running)
    nox -s bench -- --backend postgres       run the scenarios, write results/ and reports/
    nox -s decide -- --relationships 20M ...  stage by stage at a target's size, rates and freshness
    nox -s report                            re-render the latest run's report
    nox -s tests                             unit suite + every backend that runs here, on tiny
    nox -s lint                              ruff
    nox -s perf                              the suite's own performance goals
    nox -s engine -- up|down|status          a Docker engine + Compose v2 for --provision compose
    nox -s down                              stop servers left running by prepare
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "none"
nox.options.sessions = ["tests"]

ROOT = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("AUTHZBENCH_CACHE", "~/.cache/authzbench")).expanduser()
VENV = CACHE / "venv"
EXTRAS = "test,lint,all,distributed"  # all: every default backend's drivers (pyproject.toml)


def _venv(session: nox.Session) -> Path:
    """Create/refresh the project venv when pyproject.toml or the checkout path changed (idempotent)."""
    key = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + str(ROOT).encode()).hexdigest()[:16]
    stamp = VENV / f".installed-{key}"
    if not stamp.exists():
        if not (VENV / "bin" / "python").exists():
            session.log(f"creating the project venv in {VENV}")
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        session.log(f"installing authzbench[{EXTRAS}] into {VENV} (pip cache {CACHE / 'pip'})")
        session.run(str(VENV / "bin" / "python"), "-m", "pip", "install", "--progress-bar", "off",
                    "-e", f"{ROOT}[{EXTRAS}]", external=True,
                    env={"PIP_CACHE_DIR": str(CACHE / "pip"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        for old in VENV.glob(".installed-*"):
            old.unlink()
        stamp.touch()
    return VENV / "bin"


def _run(session: nox.Session, tool: str, *args: str) -> None:
    session.run(str(_venv(session) / tool), *args, external=True)


@nox.session
def prepare(session: nox.Session) -> None:
    """Generate the dataset, start and load the backends (servers keep running for `bench`)."""
    _run(session, "authzbench", "prepare", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Run the scenarios (preparing what is missing) and write the report under reports/."""
    _run(session, "authzbench", "bench", *session.posargs)


@nox.session
def decide(session: nox.Session) -> None:
    """Measure the backends at a target's needs, stage by stage (results/decide-<id>/decide.json)."""
    _run(session, "authzbench", "decide", *session.posargs)


@nox.session
def report(session: nox.Session) -> None:
    """Render the report of the latest run (or `-- RUN_DIR`, or `-- --compare A B`)."""
    _run(session, "authzbench", "report", *session.posargs)


@nox.session
def down(session: nox.Session) -> None:
    """Stop the servers that prepare/up left running."""
    _run(session, "authzbench", "down", *session.posargs)


# Every backend with a local image (compose/local/local-images.yaml), run through the real compose path.
COMPOSE_BACKENDS = "postgres,spicedb-pg,openfga,permify,scylla,elasticsearch"
COMPOSE_TESTS = ["tests/backends/test_scenarios.py", "tests/backends/test_compose_lifecycle.py"]


@nox.session
def tests(session: nox.Session) -> None:
    """Unit suite plus every backend that can run on this machine, natively, on the tiny profile; then the
    backends with a local image through `--provision compose --local-images`, under a Docker engine found or
    started for the purpose (skipped with one line where there is none and none can be started)."""
    if session.posargs:
        _run(session, "python", "-m", "pytest", "-p", "no:cacheprovider", *session.posargs)
        return
    # the 25 slowest tests named at the end: CI's 90-minute limit is watched from its log
    _run(session, "python", "-m", "pytest", "-p", "no:cacheprovider", "--backend", "all", "--profile", "tiny",
         "--rounds", "50", "--durations=25")
    _run(session, "python", "-m", "pytest", "-p", "no:cacheprovider", "--provision", "compose",
         "--local-images", "--backend", COMPOSE_BACKENDS, "--profile", "tiny", "--rounds", "20",
         *COMPOSE_TESTS)


@nox.session
def engine(session: nox.Session) -> None:
    """A Docker engine and Compose v2 for --provision compose: `-- up` (default) finds or, as root, installs
    and starts one; `-- down` stops only the dockerd authzbench started; `-- status`."""
    _run(session, "authzbench", "engine", *(session.posargs or ["up"]))


@nox.session
def lint(session: nox.Session) -> None:
    _run(session, "ruff", "check", "authzbench", "tests", "noxfile.py")


@nox.session
def perf(session: nox.Session) -> None:
    """The suite's own performance goals (generator, oracle, harness capacity, open-loop accuracy)."""
    _run(session, "authzbench", "perf", *session.posargs)
