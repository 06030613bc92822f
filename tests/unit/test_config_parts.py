"""The run's options in their parts: the manifest still records them as one flat dict under the names the
report and the committed example runs use, and a flat dict builds the same parts back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from authzbench.config import BenchConfig, DatasetChoice, MixedLoad, Schedule, ServerChoice, Targets
from authzbench.core.errors import UserError
from authzbench.generator import obtain

EXAMPLES = Path(__file__).parents[2] / "reports" / "data"


def _bench_manifests() -> list[dict]:
    """The committed bench runs' recorded options (the crosscheck runs record their own, other keys)."""
    configs = [json.loads(p.read_text())["config"] for p in sorted(EXAMPLES.glob("*/manifest.json"))]
    return [c for c in configs if "model" in c]


def test_the_manifest_records_every_option_flat_under_the_names_committed_runs_use():
    flat = BenchConfig().to_manifest()
    committed = _bench_manifests()
    assert committed, "no committed bench run to compare with"
    for c in committed:
        assert set(c) <= set(flat), sorted(set(c) - set(flat))
    assert all(
        not isinstance(v, (DatasetChoice, ServerChoice, Schedule, MixedLoad, Targets)) for v in flat.values())


def test_a_flat_dict_builds_each_option_into_its_part_and_back(tmp_path):
    cfg = BenchConfig.of(backends=["reference"], profile="tiny", data_dir=tmp_path, rounds=3, rate=50.0,
                         target_qps=1e4, ingest_variants="all")
    assert (cfg.servers.backends, cfg.data.profile, cfg.data.data_dir) == (["reference"], "tiny", tmp_path)
    assert (cfg.schedule.rounds, cfg.mixed.rate, cfg.targets.target_qps) == (3, 50.0, 1e4)
    flat = cfg.to_manifest()
    assert flat["data_dir"] == str(tmp_path) and json.loads(json.dumps(flat)) == flat
    again = BenchConfig.of(**{**flat, "data_dir": Path(flat["data_dir"])})
    assert again == cfg


def test_a_committed_run_s_options_build_a_config_again():
    for c in _bench_manifests():
        cfg = BenchConfig.of(**{k: v for k, v in c.items() if k != "data_dir"})
        assert cfg.servers.backends == c["backends"] and cfg.schedule.rounds == c["rounds"]


def test_an_option_no_part_declares_is_refused_like_a_constructor_argument():
    with pytest.raises(TypeError, match="colour"):
        BenchConfig.of(colour="blue")


def test_each_part_refuses_its_own_bad_value_alone():
    with pytest.raises(UserError, match="--dau"):
        DatasetChoice(dau=2).validate()
    with pytest.raises(UserError, match="--max-load-minutes"):
        ServerChoice(backends=["reference"], provision="native", max_load_minutes=0).validate()
    with pytest.raises(UserError, match="--visits"):
        Schedule(rounds=1, visits=2).validate()
    with pytest.raises(UserError, match="--stage"):
        MixedLoad(stages=[(100.0, -5.0)]).validate()
    with pytest.raises(UserError, match="--target-qps"):
        Targets(target_qps=1e3).validate()


def test_what_holds_between_parts_is_refused_by_the_whole_config():
    """Each part alone is valid here; BenchConfig checks the mixed load's write kind against the dataset's
    model, and a scenario against it."""
    cfg = BenchConfig.of(backends=["reference"], provision="native", profile="tiny", write_kind="membership",
                         model="social")
    cfg.mixed.validate()
    cfg.data.validate()
    with pytest.raises(UserError, match="--write-kind membership needs --model rebac"):
        cfg.validate()
    with pytest.raises(UserError, match="belongs to the rebac model, not social"):
        BenchConfig.of(backends=["reference"], provision="native", profile="tiny", scenarios=["mixed"],
                       model="social").validate()


def test_the_dataset_is_generated_once_then_reused_from_its_directory(tmp_path):
    said: list[str] = []
    first = obtain("rebac", "tiny", {}, tmp_path, announce=said.append)
    again = obtain("rebac", "tiny", {}, tmp_path, announce=said.append)
    assert again.path == first.path and again.hash == first.hash
    assert len(said) == 1 and "generating dataset rebac/tiny" in said[0]
    assert first.path.parent == tmp_path
