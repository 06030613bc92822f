"""OpenFGA tuples files read as the model's Edges (systems/openfga/export.py): what `fga tuple read` prints
(its full and simple JSON), JSON lines, YAML and the CLI's CSV; every bad tuple refused in one line naming the
file and row."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from authzbench.core.errors import UserError
from authzbench.generator import generate
from authzbench.imports.edges import Edge
from authzbench.imports.mapping import Mapper, default_mapping
from authzbench.schema.model import relation_defs
from authzbench.systems.openfga.adapter import tuple_key
from authzbench.systems.openfga.export import read_file, suite_mapping

KEYS = [{"user": "group:2#membership", "relation": "member", "object": "group:1"},
        {"user": "user:3", "relation": "viewer_user", "object": "resource:9"}]
WANT = [("group_child", "1", "2"), ("resource_viewer_user", "9", "3")]
CSV_HEAD = "user_type,user_id,user_relation,relation,object_type,object_id,condition_name,condition_context\n"


def read(tmp_path, name: str, text: str, drop: bool = False) -> list[Edge]:
    p = tmp_path / name
    p.write_text(text)
    return list(read_file(p, Mapper(default_mapping(), drop_unmapped=drop)))


@pytest.mark.parametrize(("name", "text"), [
    ("read.json", json.dumps({"tuples": [{"key": k, "timestamp": "2026-12-02T00:00:00Z"} for k in KEYS],
                              "continuation_token": ""})),
    ("simple.json", json.dumps(KEYS)),
    ("t.jsonl", "\n".join(json.dumps(k) for k in KEYS) + "\n"),
    ("t.yaml", "".join(f"- user: {k['user']}\n  relation: {k['relation']}\n  object: {k['object']}\n"
                       for k in KEYS)),
    ("store.fga.yaml", "name: s\ntuples:\n" + "".join(
        f"  - user: {k['user']}\n    relation: {k['relation']}\n    object: {k['object']}\n" for k in KEYS)),
    ("t.csv", CSV_HEAD + "group,2,membership,member,group,1,,\nuser,3,,viewer_user,resource,9,,\n"),
])
def test_every_file_form_the_cli_writes_reads_the_same_edges(tmp_path, name, text):
    assert [e[:3] for e in read(tmp_path, name, text)] == WANT


def test_where_names_the_tuple_in_json_and_the_line_in_csv(tmp_path):
    assert read(tmp_path, "s.json", json.dumps(KEYS))[1].where.endswith("s.json: tuple 2")
    rows = CSV_HEAD + "group,2,membership,member,group,1,,\nuser,3,,viewer_user,resource,9,,\n"
    csv_rows = read(tmp_path, "t.csv", rows)
    assert csv_rows[1].where.endswith("t.csv:3")


def test_a_generated_dataset_written_as_the_adapters_tuples_reads_back_tuple_for_tuple(tmp_path):
    ds = generate("tiny", tmp_path / "ds")
    defs = relation_defs("rebac")
    want, keys = Counter(), []
    for rel in ds.authz_relations():
        for o, s in zip(ds.table(rel)["object"], ds.table(rel)["subject"], strict=True):
            keys.append(tuple_key(defs[rel], o, s))
            want[(rel, str(o), str(s))] += 1
    p = tmp_path / "all.json"
    p.write_text(json.dumps(keys))
    got = Counter(e[:3] for e in read_file(p, suite_mapping()))
    assert got == want and sum(want.values()) > 1000


@pytest.mark.parametrize(("name", "text", "reason"), [
    ("t.json", json.dumps([{"user": "user:1", "relation": "viewer_user"}]),
     r"t\.json: tuple 1: malformed row: a tuple needs user, relation and object"),
    ("t.json", json.dumps([KEYS[0], "user:1 viewer resource:2"]),
     r"t\.json: tuple 2: malformed row: .*an object"),
    ("t.json", json.dumps([{"user": "user1", "relation": "viewer_user", "object": "resource:2"}]),
     "malformed row: user 'user1' or object 'resource:2' is not type:id"),
    ("t.json", json.dumps([{**KEYS[1], "condition": {"name": "in_office", "context": {}}}]),
     r"t\.json: tuple 1: caveat or condition 'in_office'"),
    ("t.json", json.dumps([{"user": "user:1", "relation": "owner", "object": "doc:2"}]),
     r"t\.json: tuple 1: no mapping for doc#owner@user"),
    ("t.json", "{\"tuples\": [", r"t\.json: not JSON"),
    ("t.json", json.dumps({"keys": []}), r"expected a list of tuples"),
    ("t.jsonl", json.dumps(KEYS[0]) + "\n{oops\n", r"t\.jsonl:2: malformed row: not JSON"),
    ("t.yaml", "- [unclosed\n", r"t\.yaml: not YAML"),
    ("t.csv", "user_type,user_id,relation,object_type,object_id\n",
     r"t\.csv:1: the header lacks user_relation"),
    ("t.csv", CSV_HEAD + "user,3,,viewer_user,resource\n",
     r"t\.csv:2: malformed row: 5 fields, the header has 8"),
    ("t.csv", CSV_HEAD + "user,,,viewer_user,resource,9,,\n", r"t\.csv:2: malformed row: empty user_type"),
    ("t.csv", CSV_HEAD + "user,3,,viewer_user,resource,9,in_office,{}\n", r"t\.csv:2: caveat or condition"),
    ("t.txt", "user:1 viewer resource:2\n", r"t\.txt: unknown tuples file type '\.txt'"),
])
def test_each_bad_tuple_or_file_is_refused_in_one_line_naming_it(tmp_path, name, text, reason):
    with pytest.raises(UserError, match=reason) as e:
        read(tmp_path, name, text)
    assert "\n" not in str(e.value)


def test_unmapped_tuples_are_dropped_and_counted_when_asked(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps([*KEYS, {"user": "user:1", "relation": "owner", "object": "doc:2"}]))
    m = Mapper(default_mapping(), drop_unmapped=True)
    assert [e[:3] for e in read_file(p, m)] == WANT
    assert dict(m.dropped) == {"doc#owner@user: no mapping for doc#owner@user": 1}
