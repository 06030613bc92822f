"""`--backend NAME@vX.Y.Z`: a release of an engine run as its own backend (issue 70). The label parses into
the system and the version, the system's declaration serves the label, a bad version, a system without a
versioned build or a release the Go module proxy does not serve is refused in one line before anything
starts, and each named version is its own build step. Also the Go toolchain a module's go.mod needs."""

from __future__ import annotations

import shutil

import pytest

from authzbench.config import ServerChoice
from authzbench.core.errors import BackendUnavailable, UserError
from authzbench.provision import gobuild
from authzbench.provision.builds import steps_for
from authzbench.systems import declared, load, split, system, systems

VERSIONED = sorted(n for n, s in systems().items() if s.versioned)
PLAIN = sorted(n for n, s in systems().items() if not s.versioned and s.adapter)


def pinned(name: str) -> str:
    """The version the system's recipe pins (its versioned build with no version given)."""
    return load(system(name).versioned)().version


def test_some_engine_has_a_versioned_build():
    assert VERSIONED and PLAIN


def test_a_label_splits_into_system_and_version():
    name = VERSIONED[0]
    assert split(f"{name}@v1.2.3") == (name, "v1.2.3")
    assert split(name) == (name, "")


def test_a_label_is_served_by_its_systems_declaration():
    name = VERSIONED[0]
    assert system(f"{name}@v1.2.3") is system(name)
    assert declared(f"{name}@v1.2.3") is system(name)
    assert declared("no-such-system@v1.2.3") is None


@pytest.mark.parametrize("version", ["1.57.1", "v1.57", "v1.57.1-rc1", "latest", "", "v1..2"])
def test_a_version_not_of_the_form_vXYZ_is_refused(version):
    with pytest.raises(UserError, match=r"release tag vX\.Y\.Z"):
        ServerChoice(backends=[f"{VERSIONED[0]}@{version}"], provision="native").validate()


def test_a_system_without_a_versioned_build_is_refused_at_a_version():
    with pytest.raises(UserError, match="has no versioned build") as e:
        ServerChoice(backends=[f"{PLAIN[0]}@v1.0.0"], provision="native").validate()
    assert VERSIONED[0] in str(e.value)  # it names those that have one


def test_a_version_runs_natively_only():
    with pytest.raises(UserError, match="--provision native only"):
        ServerChoice(backends=[f"{VERSIONED[0]}@v1.0.0"], provision="external").validate()


def test_the_form_of_every_label_is_checked_before_any_is_asked_for():
    """The second label's bad form is refused before the first (unserved) one costs a module lookup."""
    with pytest.raises(UserError, match="release tag"):
        ServerChoice(backends=[f"{VERSIONED[0]}@v0.0.1", f"{VERSIONED[0]}@x"], provision="native").validate()


@pytest.mark.skipif(not shutil.which("go"), reason="asks the Go module proxy through the go command")
def test_a_version_the_proxy_does_not_serve_is_refused_naming_those_served():
    with pytest.raises(UserError, match=r"does not serve .* v0\.0\.1 \(newest served: v") as e:
        ServerChoice(backends=[f"{VERSIONED[0]}@v0.0.1"], provision="native").validate()
    assert len(str(e.value).splitlines()) == 1


def test_a_cached_build_needs_no_module_lookup(monkeypatch):
    m = load(system(VERSIONED[0]).versioned)()
    monkeypatch.setattr(gobuild, "go_binary_ready", lambda mod: mod == m)
    monkeypatch.setattr(gobuild, "require_go", lambda: pytest.fail("asked the module proxy"))
    assert gobuild.not_served(m) is None


def test_each_named_version_is_its_own_build_step_and_shared_steps_run_once():
    name = VERSIONED[0]
    steps = [s.what for s in steps_for([f"{name}@v1.0.0", f"{name}@v2.0.0"], "native")]
    assert len(steps) == len(set(steps))
    assert any("v1.0.0" in s for s in steps) and any("v2.0.0" in s for s in steps)
    plain = [s.what for s in steps_for([name], "native")]
    assert len(steps) == len(plain) + 1  # one more Go build; the rest (PostgreSQL) once


def test_a_versioned_build_is_cached_under_its_version():
    name = VERSIONED[0]
    a, b = (load(system(name).versioned)(v) for v in ("v1.0.0", "v2.0.0"))
    assert a.version == "v1.0.0" and b.version == "v2.0.0" and a.name == b.name
    assert a.build_id != b.build_id
    assert load(system(name).versioned)().version == pinned(name)


@pytest.mark.parametrize(("required", "local", "chain"), [
    ("1.26.9", "go1.26.8", gobuild.NEWER_GO),  # SpiceDB v1.57.1's go.mod on these machines
    ("1.25", "go1.26.8", "local"),
    ("1.26.8", "go1.26.8", "local"),
    ("", "go1.26.8", "local"),
    ("1.27.3", "go1.26.8", gobuild.NEWER_GO),
])
def test_the_toolchain_is_the_local_go_unless_the_module_needs_more(required, local, chain):
    assert gobuild.toolchain_for(required, local) == chain


def test_a_module_needing_more_than_the_newer_go_is_one_line():
    with pytest.raises(BackendUnavailable, match="needs Go 1.28"):
        gobuild.toolchain_for("1.28", "go1.26.8")


def test_the_go_directive_is_read_from_go_mod():
    assert gobuild.required_go("module x\n\ngo 1.26.9\n\ntoolchain go1.27.1\n") == "1.26.9"
    assert gobuild.required_go("module x\n") == ""
    assert gobuild.go_version("go1.27.3") > gobuild.go_version("1.26.9") > gobuild.go_version("1.26")
