"""A skipped load reports the load of the data it reuses only when that load was of the same dataset on a
server provisioned the same way (the compose run that reported the native SSTable load as its own)."""

from __future__ import annotations

import json

from authzbench.run.loading import _prior_load
from authzbench.run.servers import state_file


def test_a_skipped_load_reuses_only_a_load_of_the_same_data_provisioned_the_same_way(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTHZBENCH_STATE", str(tmp_path))
    path = state_file("scylla").with_suffix(".load.json")
    path.parent.mkdir(parents=True)
    rec = {"type": "ingest", "backend": "scylla", "dataset_hash": "h1", "load_seconds": 13.9,
           "provision": "native"}
    path.write_text(json.dumps(rec))
    assert _prior_load("scylla", "native", "h1") == rec
    assert _prior_load("scylla", "compose", "h1") is None  # the native load is not the compose server's
    assert _prior_load("scylla", "native", "h2") is None
    path.write_text(json.dumps({k: v for k, v in rec.items() if k != "provision"}))  # written before this fix
    assert _prior_load("scylla", "native", "h1") is None
    assert _prior_load("postgres", "native", "h1") is None  # no record at all
