"""records.py, the one schema of records.jsonl: every kind round-trips, a line that does not fit its kind is
refused naming the kind and the field, a newer schema is refused in one line, and every committed run (written
before the schema had a version) still decodes."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from authzbench.core import records
from authzbench.core.records import KINDS, SCHEMA_VERSION, RecordError, decode, encode
from authzbench.results.store import RunStore

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = sorted((ROOT / "reports/data").glob("*/records.jsonl.gz"))

# one value of each field type the dataclasses use (their annotations are strings: `from __future__`)
SAMPLE = {"str": "x", "int": 3, "float": 1.5, "bool": True, "dict": {"k": 1}, "list": [1, "a"]}


def full(cls: type[records.Record]) -> records.Record:
    """An instance with every field set, optional ones included."""
    return cls(**{f.name: SAMPLE[str(f.type).split(" ")[0]] for f in dataclasses.fields(cls)})


def minimal_line(kind: str) -> dict:
    """The line of a record with only its required fields."""
    cls = KINDS[kind]
    req = {
        f.name: SAMPLE[str(f.type).split(" ")[0]] for f in dataclasses.fields(cls) if f.default is not None}
    return encode(cls(**req))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_round_trips_through_encode_and_decode_with_every_field(kind):
    rec = full(KINDS[kind])
    line = json.loads(json.dumps(encode(rec)))
    assert line["type"] == kind and line["v"] == SCHEMA_VERSION
    assert decode(line) == rec


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_leaves_unset_optional_fields_out_of_its_line_and_decodes_them_as_none(kind):
    line = minimal_line(kind)
    optional = [f.name for f in dataclasses.fields(KINDS[kind]) if f.default is None]
    assert not set(optional) & set(line)
    assert all(getattr(decode(line), n) is None for n in optional)


def test_a_required_field_that_is_none_is_still_written():
    line = encode(records.Step(backend=None, step="builds before measuring", t0=1.0, seconds=2.0))
    assert line["backend"] is None and "ts" not in line


def test_an_unknown_type_is_refused_naming_it():
    with pytest.raises(RecordError, match="unknown record type 'intervall'"):
        decode({"type": "intervall", "phase": "p"})
    with pytest.raises(RecordError, match="unknown record type None"):
        decode({"phase": "p"})


def test_an_unknown_field_is_refused_naming_the_kind_and_the_field():
    line = {**minimal_line("oracle"), "secs": 1.0}
    with pytest.raises(RecordError, match="^oracle record: unknown field 'secs'$"):
        decode(line)


def test_a_missing_required_field_is_refused_naming_the_kind_and_the_field():
    line = minimal_line("phase_end")
    del line["wall_s"]
    with pytest.raises(RecordError, match="^phase_end record: missing field 'wall_s'$"):
        decode(line)


def test_a_newer_schema_version_is_refused_in_one_line():
    line = {**minimal_line("oracle"), "v": SCHEMA_VERSION + 1}
    with pytest.raises(RecordError) as e:
        decode(line)
    assert "\n" not in str(e.value) and f"version {SCHEMA_VERSION + 1} is newer" in str(e.value)


def test_a_line_without_a_version_is_version_1():
    assert decode({"type": "oracle", "seconds": 1.0}) == records.Oracle(seconds=1.0)


def test_the_store_writes_a_typed_record_stamped_and_versioned_and_reads_it_back(tmp_path):
    store = RunStore.create(tmp_path)
    written = store.append(records.Oracle(seconds=2.5))
    assert written.ts is not None
    raw = json.loads((store.path / "records.jsonl").read_text())
    assert raw == {"type": "oracle", "seconds": 2.5, "ts": written.ts, "v": SCHEMA_VERSION}
    assert list(store.records()) == [{"type": "oracle", "seconds": 2.5, "ts": written.ts}]
    assert list(store.typed()) == [written]


def test_the_store_refuses_a_plain_dict(tmp_path):
    store = RunStore.create(tmp_path)
    with pytest.raises(AttributeError):
        store.append({"type": "oracle", "seconds": 1.0})  # type: ignore[arg-type]
    assert not (store.path / "records.jsonl").exists()


def test_reading_a_line_that_does_not_fit_names_the_file_and_the_line(tmp_path):
    store = RunStore.create(tmp_path)
    store.append(records.Oracle(seconds=1.0))
    with open(store.path / "records.jsonl", "a") as fh:
        fh.write(json.dumps({"type": "oracle", "seconds": 1.0, "extra": 1}) + "\n")
    with pytest.raises(RecordError, match=r"records\.jsonl line 2: oracle record: unknown field 'extra'"):
        list(store.records())


def test_there_are_committed_runs_to_check():
    assert len(COMMITTED) >= 3


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.parent.name)
def test_every_record_of_every_committed_run_decodes(path):
    with gzip.open(path, "rt") as fh:
        lines = [json.loads(s) for s in fh if s.strip()]
    typed = list(RunStore(path.parent).typed())
    assert len(typed) == len(lines) > 0
    assert [r.KIND for r in typed] == [raw["type"] for raw in lines]
