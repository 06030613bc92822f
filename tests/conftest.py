"""pytest interface of the suite: `pytest --backend NAME` runs the scenario suite against real servers.

Without --backend only the fast unit suite runs; tests marked `backend("name")` are skipped with
the flag that enables them. Servers are started once per session through the provisioner, loaded
once per backend and profile, and always stopped at the end (also on failure or Ctrl-C).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import signal
import threading
from pathlib import Path

import pytest

from authzbench.backends.registry import backend_class, entry
from authzbench.core.errors import UserError
from authzbench.core.records import Server
from authzbench.provision.manager import MODES, default_mode
from authzbench.run.servers import why_not_native_here
from authzbench.systems import split, systems

PROFILES = ("tiny", "baseline", "large", "xl")


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("authzbench", "authzbench: real-backend scenario suite")
    g.addoption(
        "--backend", action="append", default=[], metavar="NAME",
        help="run the real-backend suite against NAME (repeatable; 'all' = every backend that can run "
        "here; 'list' prints them)")
    g.addoption("--provision", default=None, choices=MODES,
                help="native | compose | external (default: native where no Docker engine runs)")
    g.addoption("--local-images", action="store_true",
                help="with --provision compose: images built here from the native builds (compose/local/)")
    g.addoption("--profile", default="tiny", help=f"dataset profile for backend tests: {', '.join(PROFILES)}")
    g.addoption("--model", default="rebac", help="authorization model: rebac | social")
    g.addoption("--consistency", default=None,
                choices=["minimize_latency", "fully_consistent", "at_least_as_fresh"],
                help="SpiceDB consistency for the timed phase (correctness always runs fully consistent)")
    g.addoption("--tier", default="cached", choices=["cached", "strict"],
                help="how SpiceDB, OpenFGA and Permify run: cached (caches on, 5 s window) or strict (fully "
                     "consistent, caches off)")
    g.addoption("--report", action="store_true", help="render the markdown report of this pytest run")
    g.addoption("--rounds", type=int, default=200, help="pytest-benchmark rounds per check scenario")


@functools.cache  # asked for every test that takes backend_name; a recipe's answer may cost a module lookup
def _native_ok(name: str) -> tuple[bool, str]:
    why = why_not_native_here(name)
    return (False, why) if why else (True, "")


def selected_backends(config: pytest.Config) -> list[str]:
    out: list[str] = []
    for v in config.getoption("backend"):
        for name in (x.strip() for x in v.split(",") if x.strip()):
            if name == "all":
                mode = config.getoption("provision") or default_mode()
                out += [n
                        for n, e in systems().items()
                        if not e.in_process and (mode != "native" or _native_ok(n)[0])]
            else:
                out.append(name)
    return list(dict.fromkeys(out))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "backend(name): needs the real server of backend NAME")
    config.addinivalue_line("markers", "any_model: runs under --model rebac and social alike")
    values = [x for v in config.getoption("backend") for x in v.split(",")]
    if "list" in values:
        lines = ["backends:"]
        for n in systems():
            ok, why = _native_ok(n)
            lines.append(f"  {n:15} {'native ok' if ok else 'not native here: ' + why}")
        pytest.exit("\n".join(lines), returncode=0)
    for name in selected_backends(config):
        try:
            entry(name)
        except UserError as e:
            raise pytest.UsageError(str(e)) from None
    if config.getoption("profile") not in PROFILES:
        raise pytest.UsageError(
            f"unknown --profile {config.getoption('profile')!r}; valid: {', '.join(PROFILES)}")
    if config.getoption("model") not in ("rebac", "social"):
        raise pytest.UsageError(f"unknown --model {config.getoption('model')!r}; valid: rebac, social")
    if config.getoption("local_images"):
        if config.getoption("provision") != "compose":
            raise pytest.UsageError("--local-images needs --provision compose")
        from authzbench.provision.compose import LOCAL_IMAGES_VAR

        os.environ[LOCAL_IMAGES_VAR] = "1"


# --provision compose: the engine, found or started for this session ----------------------------

_ENGINE: dict[str, object] = {}
COMPOSE_TEST_PROJECT = "authzbench-pytest"  # never the user's `authzbench` project


def _compose_engine(config: pytest.Config) -> str | None:
    """Under --provision compose, find or (as root) start a Docker engine with Compose v2 for the
    session; None when ready, else the one-line reason the compose tests are skipped."""
    if (config.getoption("provision") or default_mode()) != "compose" or not selected_backends(config):
        return None
    if "engine" in _ENGINE or "why" in _ENGINE:
        return _ENGINE.get("why")  # type: ignore[return-value]
    from authzbench.core.errors import BackendUnavailable
    from authzbench.provision import compose
    from authzbench.provision.engine import ensure_engine

    try:
        e = ensure_engine(start=True)
    except BackendUnavailable as ex:
        _ENGINE["why"] = f"no Docker engine for --provision compose: {ex}"
        print(f"\nauthzbench: compose tests skipped: {ex}")
        return _ENGINE["why"]  # type: ignore[return-value]
    _ENGINE["engine"] = e
    compose.use_engine(e)
    os.environ.setdefault("AUTHZBENCH_COMPOSE_PROJECT", COMPOSE_TEST_PROJECT)
    for var in compose.port_variables():  # ephemeral host ports, read back from the engine: no clash
        os.environ.setdefault(var, "0")
    compose.compose_project_down()  # what an earlier, killed session may have left
    return None


def pytest_unconfigure(config: pytest.Config) -> None:
    """The dockerd this session started (if any) is stopped, by its PID; a user's engine is never touched."""
    e = _ENGINE.pop("engine", None)
    if e is not None:
        e.stop()  # type: ignore[attr-defined]


_SIGNAL: dict[str, int] = {}


def _on_signal(signum, frame) -> None:
    """SIGINT / SIGTERM / SIGHUP end the session like Ctrl-C (pytest then tears the session down: the
    servers it started are stopped); a second signal kills what this process started and exits at once."""
    from authzbench.core.stopping import kill_children

    if _SIGNAL:
        kill_children()
        os._exit(128 + signum)
    _SIGNAL["signum"] = signum
    raise KeyboardInterrupt(signal.Signals(signum).name)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    if selected_backends(session.config) and threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, _on_signal)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    if _SIGNAL:
        from authzbench.core.stopping import stop_children

        stop_children()  # a server whose start the signal cut short has no Session to stop it
        session.exitstatus = 128 + _SIGNAL["signum"]  # 130 / 143 / 129, like `authzbench bench`


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = {split(n)[0] for n in selected_backends(config)}  # NAME@VERSION runs NAME's tests
    no_engine = _compose_engine(config)
    for item in items:
        if no_engine and (
            item.get_closest_marker("backend") or "backend_name" in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.skip(reason=no_engine))
            continue
        for mark in item.iter_markers("backend"):
            name = mark.args[0]
            if name not in chosen:
                item.add_marker(
                    pytest.mark.skip(reason=f"needs a real {name} server: run with --backend {name}"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend_name" in metafunc.fixturenames:
        names = selected_backends(metafunc.config)
        mark = metafunc.definition.get_closest_marker("backend")
        if mark:  # a backend's own test file runs against that backend only
            names = [n for n in names if split(n)[0] == mark.args[0]] or [mark.args[0]]
        if names:
            metafunc.parametrize("backend_name", names, scope="session")
        else:
            metafunc.parametrize(
                "backend_name",
                [pytest.param(
                     "none",
                     marks=pytest.mark.skip(reason="real-backend scenario suite: run with --backend NAME"))],
                scope="session")


# session fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def dataset(request, tmp_path_factory):
    from authzbench.generator import generate

    return generate(request.config.getoption("profile"), tmp_path_factory.mktemp("datasets") / "ds",
                    model=request.config.getoption("model"))


@pytest.fixture(scope="session")
def oracle(dataset):
    from authzbench.truth.social_oracle import oracle_for

    return oracle_for(dataset)


@pytest.fixture(scope="session")
def run_store(request, tmp_path_factory):
    """Results of this pytest run, in the same format as `authzbench bench` (for --report)."""
    from authzbench.results.store import RunStore

    base = Path("results") if request.config.getoption("report") else tmp_path_factory.mktemp("results")
    store = RunStore.create(
        base, run_id="pytest-" + __import__("authzbench.results.store").results.store.new_run_id(),
        config={"via": "pytest", "profile": request.config.getoption("profile"),
                "backends": selected_backends(request.config)})
    yield store
    if request.config.getoption("report"):
        from authzbench.report import render

        path = render(store.path, Path("reports"))
        print(f"\nauthzbench report: {path}")


class _Deployments:
    """Starts each backend once, loads the dataset once, stops everything at the end, whatever happens."""

    def __init__(self, config: pytest.Config, root: Path):
        self.config, self.root = config, root
        self.live: dict[str, object] = {}
        self.failed: dict[str, str] = {}

    def get(self, name: str, dataset, store):
        if name in self.failed:
            pytest.fail(f"{name} could not be started: {self.failed[name]}")
        if name not in self.live:
            from dataclasses import asdict

            from authzbench.config import ServerChoice
            from authzbench.run.loading import load_backend
            from authzbench.run.servers import Session

            servers = ServerChoice(
                backends=[name], provision=self.config.getoption("provision") or default_mode(),
                tier=self.config.getoption("tier"))
            if dataset.model not in entry(name).models:
                pytest.skip(f"{name} does not implement the {dataset.model!r} model")
            try:
                os.environ.setdefault("AUTHZBENCH_STATE", str(self.root / "state"))
                sess = Session(name, servers, dataset.model, reuse=False)
                sess.options["dataset_path"] = str(dataset.path)  # for the in-process reference backend
                self.live[name] = sess
                load_backend(sess, dataset, store, reload=True)
                with sess.backend(dataset_path=str(dataset.path)) as b:
                    store.append(Server(backend=name, mode=sess.dep.mode, info=asdict(b.server_info()),
                                        endpoint=sess.dep.public_endpoint(), notes=sess.dep.notes,
                                        concurrency_model=backend_class(name).concurrency))
            except UserError as e:
                self.failed[name] = str(e)
                pytest.fail(f"{name} could not be started: {e}")
        return self.live[name]

    def stop_all(self) -> None:
        while self.live:
            _, sess = self.live.popitem()
            with contextlib.suppress(Exception):
                sess.stop()


@pytest.fixture(scope="session")
def compose_project(request):
    """Under --provision compose: at the end, `down -v` of the session's project, which must leave no
    container, network or volume behind (fails the session otherwise)."""
    yield _ENGINE.get("engine")
    if "engine" in _ENGINE:
        from authzbench.provision import compose

        compose.compose_project_down()
        left = compose.leftovers()
        assert not left, f"`docker compose down -v` left {', '.join(left)}"


_LIVE: list[_Deployments] = []  # the session's deployments, once a test asked for them


@pytest.fixture(scope="session")
def deployments(request, tmp_path_factory, compose_project):
    deps = _Deployments(request.config, tmp_path_factory.mktemp("servers"))
    atexit.register(deps.stop_all)  # also on Ctrl-C / internal errors
    _LIVE.append(deps)
    yield deps
    deps.stop_all()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After the last test that uses the servers (and its fixtures' teardown), stop them: the unit tests after
    them measure CPU and latency. With the idle servers (JVMs among them) up until the session's end, make
    test on d9f2711 read 15-43% of a core foreign in those tests and a churn step's checks past a 250 ms SLO;
    with them stopped, on 3d99974, it passed."""
    yield
    # at a module's end only: its module-scoped fixtures (a backend file's `scratch`, dropped on the server)
    # are torn down by then; test_mongo.py alone, stopped after its last server test, failed that teardown
    if not _LIVE or nextitem is None or nextitem.module is item.module:
        return
    items = item.session.items
    if not any("deployments" in getattr(it, "fixturenames", ()) for it in items[items.index(nextitem):]):
        _LIVE[0].stop_all()


@pytest.fixture(scope="session")
def live(backend_name, deployments, dataset, run_store):
    """The running, loaded deployment of `backend_name` (a Session: .backend(), .factory(), .dep)."""
    return deployments.get(backend_name, dataset, run_store)
