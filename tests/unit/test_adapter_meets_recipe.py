"""run/servers.py hands a backend's adapter to provisioning: provisioning gets the adapter's endpoint readers
from it, and an endpoint gets the tools the adapter runs (the declaration's `tools`: Scylla's SSTable helper),
which the adapter never builds itself (an adapter never imports a recipe)."""

from __future__ import annotations

import sys

import pytest

from authzbench.backends.registry import backend_class
from authzbench.core.errors import BackendUnavailable
from authzbench.provision import manager
from authzbench.provision.base import Deployment
from authzbench.run import servers

HELPER = [sys.executable, "-m", "authzbench.systems.scylla.native"]


def test_an_external_scylla_endpoint_names_the_helper_that_builds_itself_on_first_use(tmp_path):
    dep = servers.provision("scylla", "external", tmp_path, {"url": "cql://127.0.0.1:9042/ks"})
    assert dep.endpoint == {"hosts": ["127.0.0.1"], "port": 9042, "keyspace": "ks", "bulk_cmd": HELPER}


def test_a_native_endpoint_keeps_the_helper_its_recipe_built(tmp_path, monkeypatch):
    built = ["java", "-cp", "x", "authzbench.SSTableBulk"]
    monkeypatch.setattr(manager, "_obtain", lambda *a: Deployment("scylla", "native", {"bulk_cmd": built}))
    assert servers.provision("scylla", "native", tmp_path, {}).endpoint == {"bulk_cmd": built}


def test_the_provisioner_reads_the_endpoint_through_the_adapter_it_is_given(tmp_path):
    dep = manager.provision("postgres", "external", tmp_path, {"url": "postgresql://u@127.0.0.1:5/db"},
                            backend_class("postgres"))
    assert dep.endpoint == backend_class("postgres").endpoint_from_url("postgresql://u@127.0.0.1:5/db")


def test_a_backend_without_a_native_recipe_says_why_before_anything_starts(tmp_path):
    with pytest.raises(BackendUnavailable, match="spicedb-crdb cannot run natively: no CockroachDB binary"):
        servers.provision("spicedb-crdb", "native", tmp_path, {})


def test_the_sstable_path_without_a_helper_in_its_endpoint_is_one_line():
    adapter = backend_class("scylla")({"hosts": ["127.0.0.1"], "port": 9042}, {})
    with pytest.raises(BackendUnavailable, match=r"ingest=sstable needs the SSTable helper.*bulk_cmd"):
        adapter._bulk_cmd()
