"""A graph loaded into OpenFGA through the suite's adapter and read back through the Read API by the importer
(issue 69) is the graph that was loaded: relationship for relationship, and every oracle answer."""

from __future__ import annotations

import pytest

from authzbench.core.errors import UserError
from authzbench.systems.openfga.export import read_server, suite_mapping
from tests.backends.roundtrip import answers_differ, as_counter, dataset_of, differences, loaded_edges

pytestmark = pytest.mark.backend("openfga")


@pytest.fixture(autouse=True)
def _rebac(dataset):
    if dataset.model != "rebac":
        pytest.skip("the rebac model's mapping")


def test_the_read_api_pages_back_every_loaded_tuple_once_and_the_oracle_agrees(session, dataset, tmp_path):
    got = as_counter(read_server(session.dep.endpoint, suite_mapping()))
    want = loaded_edges(dataset)
    assert sum(want.values()) > 100, "tiny must span many Read pages of 100 for the paging to be tested"
    assert got == want, differences(got, want)
    assert answers_differ(dataset, dataset_of(got, dataset, tmp_path / "back")) == []


def test_a_store_that_does_not_exist_is_one_line(session):
    with pytest.raises(UserError, match="no store named 'nobody-here'"):
        list(read_server(session.dep.endpoint, suite_mapping(), store="nobody-here"))
