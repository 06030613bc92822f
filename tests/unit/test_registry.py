"""The registry is the one description of each backend's adapter: its driver distributions and pip extra
agree with pyproject.toml's extras, results.DRIVERS and the noxfile; its native and compose recipes
(provision/manager.NATIVE, provision/compose.SERVICES) agree with it and with compose/docker-compose.yaml,
for every backend (docs/ADDING-A-BACKEND.md)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from authzbench.backends.base import Backend
from authzbench.backends.registry import BACKENDS, backend_class, extras, missing_driver
from authzbench.provision import compose, manager
from authzbench.results.store import DRIVERS
from authzbench.run import stack

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]
ADAPTERS = [n for n, e in BACKENDS.items() if e.impl and not e.in_process]


def _dist(requirement: str) -> str:
    """The distribution a requirement names: "psycopg[binary]==3.3.9" -> "psycopg"."""
    return re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group(0).lower()


@pytest.mark.parametrize("name", ADAPTERS)
def test_every_adapter_declares_its_drivers_and_extra(name):
    e = BACKENDS[name]
    assert e.drivers and e.extra, f"{name}: declare drivers=(...) and extra=... in its BackendEntry"
    assert e.models and e.models <= {"rebac", "social"}


def test_pyproject_extras_hold_exactly_each_backends_drivers_pinned():
    for extra, drivers in extras().items():
        assert extra in EXTRAS, f"pyproject.toml has no [{extra}] extra"
        assert {_dist(r) for r in EXTRAS[extra]} == drivers, extra
        assert all("==" in r for r in EXTRAS[extra]), f"[{extra}]: drivers are pinned"
    core = {_dist(r) for r in PYPROJECT["project"]["dependencies"]}
    declared = {d for e in BACKENDS.values() for d in e.drivers}
    assert not core & declared, "a driver is a core dependency: it belongs in its backend's extra only"


def test_all_installs_every_default_backend_and_make_test_installs_all():
    (spec,) = EXTRAS["all"]
    m = re.fullmatch(r"authzbench\[([a-z0-9,_-]+)\]", spec)
    assert m, spec
    assert set(m.group(1).split(",")) == {e.extra for e in BACKENDS.values() if e.default and e.extra}
    nox = (ROOT / "noxfile.py").read_text()
    assert re.search(r'^EXTRAS = "test,lint,all(,[a-z]+)*"', nox, re.M)  # plus optional extras (distributed)


def test_results_record_every_driver_version():
    assert {d for e in BACKENDS.values() for d in e.drivers} <= set(DRIVERS)


def test_every_backend_with_services_has_an_endpoint_and_every_service_a_backend():
    spec = compose.load_compose({**compose.versions()})
    owned: set[str] = set()
    for name in BACKENDS:
        if not compose.SERVICES.get(name):
            continue
        owned |= set(compose.services_for(name, spec))
        if name not in compose.OWN_ENDPOINTS:  # declared by the adapter itself, not inherited from Backend
            assert backend_class(name).endpoint_from_compose.__func__ is not Backend.endpoint_from_compose.__func__
        assert stack.compose_endpoint(name, spec), name
    assert owned == set(spec["services"]), f"services no backend uses: {set(spec['services']) - owned}"
    assert set(compose.SERVICES) <= set(BACKENDS)


@pytest.mark.parametrize("name", [n for n, e in BACKENDS.items() if not e.why_not_native])
def test_every_native_recipe_and_adapter_resolves(name):
    assert callable(manager.native_recipe(name).start)
    assert missing_driver(name) is None  # the test venv installs `all`
    assert issubclass(backend_class(name), Backend)


def test_a_backend_has_a_native_recipe_exactly_when_its_entry_gives_no_reason_it_cannot():
    assert {n for n, e in BACKENDS.items() if not e.why_not_native} == set(manager.NATIVE)
    assert {n for n in BACKENDS if stack.runs_natively(n)} == set(manager.NATIVE)


def test_a_missing_driver_names_the_extra_to_install(monkeypatch):
    from dataclasses import replace

    from authzbench.backends.registry import implementation
    from authzbench.core.errors import BackendUnavailable

    monkeypatch.setitem(BACKENDS, "scylla", replace(BACKENDS["scylla"], drivers=("no-such-driver-dist",)))
    assert missing_driver("scylla") == "driver no-such-driver-dist is not installed: pip install 'authzbench[scylla]'"
    with pytest.raises(BackendUnavailable, match=r"pip install 'authzbench\[scylla\]'"):
        implementation("scylla")
    assert missing_driver("postgres") is None  # only that backend is disabled
