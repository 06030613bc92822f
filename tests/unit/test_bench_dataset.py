"""`bench --dataset PATH`: an imported dataset is the run's dataset exactly as a profile's would be, recorded
with its origin, named in the report; what cannot hold with it is refused in one line before anything runs."""

from __future__ import annotations

import pytest

from authzbench.cli import build_parser
from authzbench.commands import _config
from authzbench.config import DatasetChoice
from authzbench.core.errors import UserError
from authzbench.imports.graph import write_graph
from authzbench.imports.readers import origin, reader
from authzbench.results.store import RunStore
from authzbench.run.dataset import dataset_and_oracle, dataset_of
from tests.unit.import_helpers import write_csvs
from tests.unit.test_import import GOOD


@pytest.fixture
def imported(tmp_path):
    src = write_csvs(tmp_path / "src", **GOOD)
    return write_graph(reader("reference-csv").edges(src), tmp_path / "ds", origin("reference-csv", src),
                       drop_unmapped=False, anonymize=False)


def test_the_run_gets_the_dataset_at_the_path(imported):
    assert dataset_of(DatasetChoice(path=imported.path)).hash == imported.hash


def test_the_config_names_the_dataset_imported_not_the_default_profile(imported):
    args = build_parser().parse_args(["bench", "--dataset", str(imported.path), "--backend", "reference"])
    cfg = _config(args)
    assert cfg.data.path == imported.path and cfg.data.profile == "imported"


def test_generator_parameters_with_a_dataset_are_refused(imported):
    with pytest.raises(UserError, match=r"^--dataset .*--set and --seed"):
        DatasetChoice(path=imported.path, overrides={"seed": "3"}).validate()


def test_a_dataset_of_another_model_is_refused(imported):
    with pytest.raises(UserError, match="is of the rebac model: add --model rebac"):
        DatasetChoice(path=imported.path, model="social").validate()


def test_a_missing_dataset_is_refused_naming_the_option(tmp_path):
    with pytest.raises(UserError, match=r"^--dataset: no dataset at"):
        DatasetChoice(path=tmp_path / "none").validate()


def test_the_run_records_the_origin_beside_the_dataset(imported, tmp_path):
    store = RunStore.create(tmp_path / "results")
    dataset_and_oracle(DatasetChoice(path=imported.path), store)
    ds = store.manifest()["dataset"]
    assert ds["profile"] == "imported" and ds["origin"]["format"] == "reference-csv"
    assert set(ds["origin"]["files"]) == {f"{n}.csv" for n in GOOD}


def test_the_report_names_the_origin_and_prints_the_distribution_table(imported, tmp_path):
    from authzbench.report.core.data import load_run
    from authzbench.report.overview import dataset, distribution

    store = RunStore.create(tmp_path / "results")
    dataset_and_oracle(DatasetChoice(path=imported.path), store)
    rd = load_run(store.path)
    assert "Not generated: imported from **reference-csv**" in dataset(rd, tmp_path)
    appendix = distribution(rd, tmp_path)
    assert "Dataset origin: imported from **reference-csv**" in appendix and "Not anonymized" in appendix
    assert "| Relationship | Mean | Min | p50 | p90 | p99 | Max | Notes |" in appendix


def test_a_sweep_with_a_dataset_is_refused_in_one_line(imported, tmp_path, capsys, monkeypatch):
    from authzbench.cli import main

    monkeypatch.setenv("AUTHZBENCH_RESULTS", str(tmp_path / "results"))
    code = main(["bench", "--dataset", str(imported.path), "--backend", "reference", "--profiles", "tiny"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "sweeps (--shape, --profiles" in err
    assert not (tmp_path / "results").exists()
