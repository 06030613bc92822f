"""The engines' two tiers (provision/tiers.py): the flags each tier gives SpiceDB, OpenFGA and Permify, the
settings their deployments record, the options that select a tier, and what the report reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

from authzbench.config import BenchConfig, ServerChoice
from authzbench.core.errors import UserError
from authzbench.provision import tiers
from authzbench.report import overview
from authzbench.report.core import engines
from authzbench.report.core.data import from_records
from authzbench.run.servers import _same_tier


def _flag(flags: list[str], name: str) -> str | None:
    """The value of --name=VALUE among flags (None when absent)."""
    return next((f.split("=", 1)[1] for f in flags if f.startswith(f"--{name}=")), None)


@pytest.mark.parametrize("engine", sorted(tiers.engines()))
@pytest.mark.parametrize("tier", tiers.TIERS)
def test_every_engine_records_its_tier_cache_window_and_pool(engine, tier):
    s = tiers.engine_tier(engine, tier).settings
    # the cached tier turns on every answer cache an engine has (Keto has none: its cache says so)
    assert s["tier"] == tier and s["cache_on"] == (tier == "cached" and not s["cache"].startswith("none"))
    assert s["pool_total"] == tiers.POOL and s["cache"] and s["freshness"] and s["pool"] and s["reads"]


def test_cached_tier_turns_every_answer_cache_on_with_one_five_second_window():
    spice, fga, perm = (tiers.engine_tier(e, "cached").flags for e in ("spicedb-pg", "openfga", "permify"))
    assert _flag(spice, "datastore-revision-quantization-interval") == "5s"
    assert _flag(spice, "datastore-revision-quantization-max-staleness-percent") == "0"
    assert (_flag(spice, "dispatch-cache-enabled") == "true"
            and _flag(spice, "dispatch-cache-max-cost") == "64MiB")
    assert _flag(fga, "check-query-cache-enabled") == "true" and _flag(fga, "check-query-cache-ttl") == "5s"
    assert (_flag(fga, "check-iterator-cache-enabled") == "true"
            and _flag(fga, "check-iterator-cache-ttl") == "5s")
    assert _flag(perm, "service-permission-cache-max-cost") == "64MiB"
    windows = {tiers.engine_tier(e, "cached").settings["freshness_s"] for e in ("spicedb-pg", "openfga")}
    assert windows == {5}
    # snapshot-keyed: no time window to set
    assert tiers.engine_tier("permify", "cached").settings["freshness_s"] is None


def test_strict_tier_turns_every_answer_cache_off():
    assert _flag(tiers.engine_tier("spicedb-pg", "strict").flags, "dispatch-cache-enabled") == "false"
    fga = tiers.engine_tier("openfga", "strict").flags
    assert (_flag(fga, "check-query-cache-enabled") == "false"
            and _flag(fga, "check-iterator-cache-enabled") == "false")
    assert _flag(tiers.engine_tier("permify", "strict").flags, "service-permission-cache-max-cost") == "1B"
    assert {
        tiers.engine_tier(e, "strict").settings["reads"] for e in ("spicedb-pg", "openfga", "permify")
    } == {"fully_consistent", "HIGHER_CONSISTENCY"}
    assert tiers.engine_tier("keto", "strict").settings["reads"].startswith("latest committed")  # no modes


def test_every_engine_gets_the_same_datastore_pool():
    spice = tiers.engine_tier("spicedb-pg", "cached").flags
    read, write = (int(_flag(spice, f"datastore-conn-pool-{k}-max-open") or 0) for k in ("read", "write"))
    assert read + write == tiers.POOL
    assert (int(_flag(tiers.engine_tier("openfga", "cached").flags, "datastore-max-open-conns") or 0)
            == tiers.POOL)
    assert (int(_flag(tiers.engine_tier("permify", "cached").flags, "database-max-connections") or 0)
            == tiers.POOL)


def test_a_start_without_a_tier_is_cached():
    assert tiers.tier_of({}) == "cached" and tiers.tier_of({"tier": "strict"}) == "strict"


def test_strict_tier_makes_every_backend_read_fully_consistent():
    cfg = BenchConfig.of(backends=["spicedb-pg", "postgres"], provision="native", tier="strict")
    cfg.validate()
    assert cfg.servers.options["consistency"] == "fully_consistent"


@pytest.mark.parametrize(
    "kw,match",
    [({"tier": "eventual"}, "--tier must be one of cached, strict"),
     ({"tier": "strict", "options": {"consistency": "at_least_as_fresh"}}, "contradicts"),
     ({"tier": "strict", "provision": "external", "options": {"url": "grpc://k@127.0.0.1:1"}},
      "--provision native")])
def test_a_tier_that_cannot_hold_is_refused(kw, match):
    cfg = BenchConfig.of(**{"backends": ["spicedb-pg"], "provision": "native", **kw})
    with pytest.raises(UserError, match=match):
        cfg.validate()


def test_saved_servers_are_reused_only_in_their_own_tier():
    saved = {"endpoint": {"engine_settings": {"tier": "cached"}}}
    assert _same_tier(saved, ServerChoice(tier="cached"))
    assert not _same_tier(saved, ServerChoice(tier="strict"))
    # no tier to differ
    assert _same_tier({"endpoint": {"dsn": "postgresql://..."}}, ServerChoice(tier="strict"))


def _run(tier: str | None, backends=("spicedb-pg", "openfga", "permify", "postgres")):
    recs = []
    for b in backends:
        ep = ({"engine_settings": {**tiers.engine_tier(b, tier).settings}}
              if tier and b in tiers.engines()
              else {})
        info = {"label": b, "version": "1", "notes": [],
                "consistency": "minimize_latency" if b in tiers.engines() else ""}
        recs.append(
            {"type": "server", "backend": b, "mode": "native", "info": info, "endpoint": ep, "notes": [],
             "concurrency_model": "process"})
    return from_records(Path("fixture"), {"config": {"tier": tier}}, recs)


def test_engine_tier_names_the_tier_and_its_recorded_window():
    assert engines.engine_tier(_run("cached", backends=("spicedb-pg", "openfga"))) == \
        "cached tier (5 s freshness window)"
    assert engines.engine_tier(_run("strict")) == "strict tier"
    assert engines.engine_tier(_run(None)) == ""  # recorded before tiers: nothing to claim
    assert engines.engine_tier(_run("cached", backends=("postgres",))) == ""


def test_servers_table_lists_each_engine_s_cache_window_pool_and_consistency(tmp_path):
    md = overview.environment(_run("cached"), tmp_path)
    assert "| Answer cache | Freshness window | Datastore pool | Read consistency |" in md
    assert "dispatch cache, 64MiB" in md and "5 s (cache TTL)" in md and "read 16 + write 4 connections" in md
    assert "minimize_latency (measured phases)" in md
    assert "**cached tier (5 s freshness window: spicedb-pg, openfga; no time window: permify)**" in md


def test_the_summary_s_freshness_windows_agree_with_the_servers_table():
    """The summary gave every engine a 5 s window while the servers table gave Permify none."""
    rd = _run("cached")
    tier = engines.engine_tier(rd)
    for b in ("spicedb-pg", "openfga", "permify"):
        column = engines.columns(rd, b)["freshness"]
        window = "no time window" if column.startswith("no time window") else column.split(" (")[0]
        listed = next(
            part for part in tier.removeprefix("cached tier (").removesuffix(")").split("; ") if b in part)
        assert listed.startswith(window), (b, column, tier)
    assert "5 s freshness window" in tier and "no time window: permify" in tier


def test_stale_allows_under_a_fully_consistent_mode_point_to_the_reproduction_outside_the_suite():
    import pandas as pd

    from authzbench.report.writes import _strict_stale_allows

    rows = pd.DataFrame(
        [{"backend": "spicedb-pg", "consistency": "fully_consistent (session)", "stale_allows": 3},
         {"backend": "openfga", "consistency": "minimize_latency", "stale_allows": 5}])
    from tests.unit.test_report_findings import NET, Run

    rd = (Run()
          .server("spicedb-pg", {**NET, "label": "SpiceDB"})
          .server("openfga", {**NET, "label": "OpenFGA"})
          .data())
    text = "\n".join(_strict_stale_allows(rd, rows))
    assert "tools/newenemy_repro.py" in text and "(spicedb-pg fully_consistent (session))" in text
    assert "openfga" not in text
    assert _strict_stale_allows(rd, rows.assign(stale_allows=0)) == []
