"""A graph loaded into SpiceDB through the suite's adapter and read back through SpiceDB's API by the
importer (issue 69) is the graph that was loaded: relationship for relationship, and every oracle answer."""

from __future__ import annotations

import pytest

from authzbench.imports.mapping import Mapper, default_mapping
from authzbench.systems.spicedb.adapter import SpiceDBBackend
from authzbench.systems.spicedb.export import _mapped, read_relationships, read_server
from tests.backends.roundtrip import answers_differ, as_counter, dataset_of, differences, loaded_edges

pytestmark = pytest.mark.backend("spicedb-pg")


@pytest.fixture(autouse=True)
def _rebac(dataset):
    if dataset.model != "rebac":
        pytest.skip("the rebac model's mapping")


def test_the_bulk_export_reads_back_every_loaded_relationship_once_and_the_oracle_agrees(
        session, dataset, tmp_path):
    got = as_counter(read_server(session.dep.endpoint, Mapper(default_mapping())))
    want = loaded_edges(dataset)
    assert got == want, differences(got, want)
    assert answers_differ(dataset, dataset_of(got, dataset, tmp_path / "back")) == []


def test_the_read_relationships_fallback_pages_to_the_same_graph(session, dataset):
    with SpiceDBBackend(session.dep.endpoint, {}) as b:
        got = as_counter(_mapped(read_relationships(b.client, b._md), "ReadRelationships",
                                 Mapper(default_mapping())))
    want = loaded_edges(dataset)
    assert sum(want.values()) > 1_000, "tiny must span several pages of 1,000 for the paging to be tested"
    assert got == want, differences(got, want)


def test_a_server_url_with_the_wrong_key_is_one_line(session):
    addr = session.dep.endpoint["addr"]
    with pytest.raises(Exception, match="rejected the preshared key"):
        list(read_server(f"grpc://wrong-key@{addr}", Mapper(default_mapping())))
