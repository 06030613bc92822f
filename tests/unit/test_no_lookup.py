"""A system whose API has no reverse lookup (its declaration's `no_lookup`): its lookup phases are recorded as
not run with that reason, and the restore check asks its anchor users by checks, never by a lookup."""

from __future__ import annotations

import dataclasses

import pytest

from authzbench.generator import generate
from authzbench.results.store import RunStore
from authzbench.run import orchestrate, restore
from authzbench.systems import system
from authzbench.systems.reference.adapter import ReferenceBackend
from authzbench.truth.oracle import Oracle

WHY = "its API answers checks only"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return generate("tiny", tmp_path_factory.mktemp("d") / "tiny")


@pytest.fixture
def lookupless(monkeypatch):
    """The reference system declared without a reverse lookup, as the run layer reads it."""
    declared = {"reference": dataclasses.replace(system("reference"), no_lookup=WHY)}
    monkeypatch.setattr(orchestrate, "declared", declared.get)
    monkeypatch.setattr(restore, "declared", declared.get)


class NoLookup(ReferenceBackend):
    def lookup_resources(self, user, perm):
        raise AssertionError("the restore check asked a lookup of a system that has none")


class _Session:
    name = "reference"

    def backend(self, **options):
        return NoLookup({}, options)


def test_a_lookup_phase_of_a_system_without_a_reverse_lookup_is_not_run_and_says_why(lookupless):
    assert orchestrate.not_offered("reference", "lookup") == WHY
    assert orchestrate.not_offered("reference", "check") == ""


def test_a_declared_reverse_lookup_runs_its_lookup_phases():
    assert orchestrate.not_offered("reference", "lookup") == ""


def test_the_restore_check_asks_the_anchor_users_by_checks_where_there_is_no_lookup(
    lookupless, tiny, tmp_path):
    rec = restore.verify_restored(_Session(), tiny, Oracle(tiny), RunStore.create(tmp_path / "r"), "p1",
                                  restore.RestoreOptions(n_checks=20))
    assert "error" not in rec and rec["mismatches"] == 0, rec
    assert rec["checked"] > 20 + 2  # the two anchors became their checks: more than one op each
    assert rec["heavy"] == "checks"


def test_the_estimate_gives_no_time_to_a_lookup_phase_the_system_cannot_run(lookupless, tiny):
    from authzbench.config import BenchConfig

    cfg = BenchConfig.of(
        backends=["reference"], provision="native", profile="tiny", concurrency=[1], rounds=1,
        scenarios=["check_negative", "lookup_resources_view_regular"])
    specs = orchestrate._plan(cfg, "reference", tiny)
    planned = orchestrate._planned(cfg, tiny, ["reference"])["reference"]
    lookups = [s for (spec, s) in specs if orchestrate.scenario(s).op == "lookup"]
    assert lookups and len(planned) == len(specs)
    assert all(sec == 0.0 for sec, (_, s) in zip(planned, specs, strict=True) if s in lookups)
    assert any(sec > 0 for sec in planned)
