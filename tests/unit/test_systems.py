"""Each system's declaration (systems/<name>/system.py) is the one description of it: its driver distributions
and pip extra agree with pyproject.toml's extras, results.DRIVERS and the noxfile; its native recipe, compose
services, build steps, tiers and local image resolve and agree with compose/docker-compose.yaml, for every
system the loader finds (docs/ADDING-A-BACKEND.md)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from authzbench.backends.base import Backend
from authzbench.backends.registry import backend_class, extras, implementation, missing_driver
from authzbench.core.errors import BackendUnavailable
from authzbench.provision import compose, manager
from authzbench.results.store import DRIVERS
from authzbench.run import servers
from authzbench.systems import folders, load, systems

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]
SYSTEMS = systems()
ADAPTERS = [n for n, e in SYSTEMS.items() if e.adapter and not e.in_process]


def _dist(requirement: str) -> str:
    """The distribution a requirement names: "psycopg[binary]==3.3.9" -> "psycopg"."""
    return re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group(0).lower()


def test_the_loader_finds_every_folder_and_each_declares_itself():
    names = {s.name for s in SYSTEMS.values()}
    assert len(folders()) >= 10 and names >= {
        "reference", "postgres", "spicedb-pg", "spicedb-crdb", "cockroach"}
    # every folder holds a declaration whose adapter and recipe, when named, are modules of that folder
    for s in SYSTEMS.values():
        for path in (s.adapter, s.native, s.endpoint):
            assert not path or path.split(".")[2] in folders(), (s.name, path)


def test_colour_slots_and_orders_are_each_one_system_s():
    slots = [s.colour for s in SYSTEMS.values() if s.colour >= 0]
    orders = [s.order for s in SYSTEMS.values()]
    assert len(slots) == len(set(slots)) and len(orders) == len(set(orders))


@pytest.mark.parametrize("name", ADAPTERS)
def test_every_adapter_declares_its_drivers_and_extra(name):
    e = SYSTEMS[name]
    assert e.drivers and e.extra, f"{name}: declare drivers=(...) and extra=... in its system.py"
    assert e.models and e.models <= {"rebac", "social"}


def test_pyproject_extras_hold_exactly_each_backends_drivers_pinned():
    for extra, drivers in extras().items():
        assert extra in EXTRAS, f"pyproject.toml has no [{extra}] extra"
        assert {_dist(r) for r in EXTRAS[extra]} == drivers, extra
        assert all("==" in r for r in EXTRAS[extra]), f"[{extra}]: drivers are pinned"
    core = {_dist(r) for r in PYPROJECT["project"]["dependencies"]}
    declared = {d for e in SYSTEMS.values() for d in e.drivers}
    assert not core & declared, "a driver is a core dependency: it belongs in its backend's extra only"


def test_all_installs_every_default_backend_and_make_test_installs_all():
    (spec,) = EXTRAS["all"]
    m = re.fullmatch(r"authzbench\[([a-z0-9,_-]+)\]", spec)
    assert m, spec
    assert set(m.group(1).split(",")) == {e.extra for e in SYSTEMS.values() if e.default and e.extra}
    nox = (ROOT / "noxfile.py").read_text()
    assert re.search(r'^EXTRAS = "test,lint,all(,[a-z]+)*"', nox, re.M)  # plus optional extras (distributed)


def test_results_record_every_driver_version():
    assert {d for e in SYSTEMS.values() for d in e.drivers} <= set(DRIVERS)


def test_every_backend_with_services_has_an_endpoint_and_every_service_a_backend():
    spec = compose.load_compose({**compose.versions()})
    owned: set[str] = set()
    for name, e in SYSTEMS.items():
        if not e.services:
            continue
        owned |= set(compose.services_for(name, spec))
        if not e.endpoint:  # read by the adapter itself, not inherited from Backend
            assert (backend_class(name).endpoint_from_compose.__func__
                    is not Backend.endpoint_from_compose.__func__)
        assert servers.compose_endpoint(name, spec), name
    assert owned == set(spec["services"]), f"services no backend uses: {set(spec['services']) - owned}"


@pytest.mark.parametrize("name", [n for n, e in SYSTEMS.items() if not e.why_not_native])
def test_every_native_recipe_and_adapter_resolves(name):
    assert callable(manager.native_recipe(name).start)
    assert missing_driver(name) is None  # the test venv installs `all`
    assert issubclass(backend_class(name), Backend)


def test_a_backend_has_a_native_recipe_exactly_when_its_declaration_gives_no_reason_it_cannot():
    assert {n for n, e in SYSTEMS.items() if not e.why_not_native} == {
        n for n in SYSTEMS if manager.runs_natively(n)}


@pytest.mark.parametrize("name", [n for n, e in SYSTEMS.items() if e.tiers or e.tools or e.image_versions])
def test_every_declared_tier_tool_and_image_function_resolves(name):
    e = SYSTEMS[name]
    for path in (e.tiers, e.tools, e.image_files, e.image_versions, e.worker_limit):
        assert not path or load(path) is not None, path
    if e.tiers:
        assert load(e.tiers)("cached").settings["tier"] == "cached"
    if e.image_versions:
        assert all(k in compose.versions() for k in load(e.image_versions)()), name


def test_a_missing_driver_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(SYSTEMS, "scylla", replace(SYSTEMS["scylla"], drivers=("no-such-driver-dist",)))
    assert (missing_driver("scylla")
            == "driver no-such-driver-dist is not installed: pip install 'authzbench[scylla]'")
    with pytest.raises(BackendUnavailable, match=r"pip install 'authzbench\[scylla\]'"):
        implementation("scylla")
    assert missing_driver("postgres") is None  # only that backend is disabled
