"""Backend options are typed: one dataclass per backend, parsed in one place, checked before any server
starts; the registry says which models a backend implements without importing it."""

from __future__ import annotations

import pickle
from dataclasses import fields

import pytest

from authzbench.backends.base import BackendOptions, option_names, parse_options
from authzbench.backends.registry import backend_class
from authzbench.config import BenchConfig, own_options
from authzbench.core.errors import UserError
from authzbench.measure.runner import BackendFactory
from authzbench.run import orchestrate
from authzbench.systems import systems
from authzbench.systems.reference.adapter import ReferenceBackend, ReferenceOptions


def test_an_unknown_option_is_one_line_naming_the_valid_keys():
    with pytest.raises(UserError) as e:
        parse_options(ReferenceOptions, {"dealy_s": 1}, "reference")
    msg = str(e.value)
    assert (
        msg.startswith("reference: unknown option dealy_s; valid: ") and "delay_s" in msg and "\n" not in msg)
    with pytest.raises(UserError, match="unknown option dealy_s"):
        ReferenceBackend({}, {"dealy_s": 1})


def test_values_from_the_command_line_get_their_declared_types():
    from authzbench.systems.scylla.adapter import ScyllaOptions

    o = parse_options(ScyllaOptions, {"batch_rows": "50", "recreate": "true", "timeout_s": "2.5"})
    assert (o.batch_rows, o.recreate, o.timeout_s) == (50, True, 2.5)
    with pytest.raises(UserError, match="option in_flight='many': expected int"):
        parse_options(ScyllaOptions, {"in_flight": "many"})
    with pytest.raises(UserError, match="consistency='eventual'"):
        parse_options(BackendOptions, {"consistency": "eventual"})


def test_a_load_path_option_out_of_range_is_refused_before_any_server_starts():
    from authzbench.systems.scylla.adapter import ScyllaOptions
    from authzbench.systems.spicedb.adapter import SpiceDBOptions

    assert parse_options(ScyllaOptions, {"ingest": "cql"}).ingest == "cql"
    with pytest.raises(UserError, match="ingest='copy'; valid: sstable, cql"):
        parse_options(ScyllaOptions, {"ingest": "copy"})
    assert parse_options(SpiceDBOptions, {"import_streams": "3"}).import_streams == 3
    with pytest.raises(UserError, match="import_streams=0; must be 1 or more"):
        parse_options(SpiceDBOptions, {"import_streams": "0"})


def test_the_constructor_still_takes_a_plain_dict_that_pickles_to_workers():
    factory = BackendFactory("authzbench.systems.reference.adapter:ReferenceBackend", {}, {"delay_s": 0.5})
    b = pickle.loads(pickle.dumps(factory)).__call__()
    assert isinstance(b.options, ReferenceOptions) and b.options.delay_s == 0.5
    assert b.options.get("timeout_s", 7.0) == 7.0  # dict-style reads of declared keys still work
    with pytest.raises(AttributeError):
        b.options.get("no_such_key")


@pytest.mark.parametrize("name", [n for n, e in systems().items() if e.adapter])
def test_every_backend_declares_typed_options_with_defaults_and_timeout_s(name):
    cls = backend_class(name).Options
    assert issubclass(cls, BackendOptions) and "timeout_s" in option_names(cls)
    cls()  # every field has a default
    assert all(f.type for f in fields(cls))


def test_an_option_of_another_chosen_backend_is_accepted_and_given_only_to_it():
    cfg = BenchConfig.of(
        backends=["reference", "elasticsearch"], profile="tiny", options={"bulk_docs": "500"})
    cfg.validate()
    assert own_options(ReferenceOptions, cfg.servers.options) == {}
    with pytest.raises(UserError, match="unknown backend option bulk_docs"):
        BenchConfig.of(backends=["reference"], profile="tiny", options={"bulk_docs": "500"}).validate()


def test_a_backend_lacking_the_model_is_skipped_before_any_server_starts(tmp_path, monkeypatch):
    def no_server(*a, **k):
        raise AssertionError("a server was started for a backend that cannot run the model")

    monkeypatch.setattr(orchestrate, "Session", no_server)
    # one chosen backend implements the model: the others are recorded skips
    cfg = BenchConfig.of(
        backends=["scylla", "clickhouse", "reference"], profile="tiny", model="social", data_dir=tmp_path)
    cfg.validate()
    assert set(cfg.servers.unsupported("social")) == {"scylla", "clickhouse"}
    # none does: refused in one line before anything starts
    with pytest.raises(UserError, match="do not implement the 'social' model"):
        BenchConfig.of(
            backends=["scylla", "clickhouse"], profile="tiny", model="social", data_dir=tmp_path).validate()
    monkeypatch.setattr(cfg.servers, "backends", ["scylla", "clickhouse"])
    failures = _prepare_skipping_validation(cfg, monkeypatch)  # a mixed set validated above
    assert failures == ["scylla: does not implement the 'social' model",
                        "clickhouse: does not implement the 'social' model"]


def _prepare_skipping_validation(cfg, monkeypatch):
    monkeypatch.setattr(BenchConfig, "validate", lambda self: None)
    return orchestrate.prepare(cfg)
