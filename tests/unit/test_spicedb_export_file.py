"""SpiceDB relationships files read as the model's Edges (systems/spicedb/export.py): the tuple form, what
`zed relationship read` prints and a validation file's relationships block; every bad line refused in one
line naming the file and line."""

from __future__ import annotations

from collections import Counter

import pytest

from authzbench.core.errors import UserError
from authzbench.generator import generate
from authzbench.imports.edges import Edge
from authzbench.imports.mapping import Mapper, default_mapping
from authzbench.schema.model import relation_defs
from authzbench.systems.spicedb.export import read_file


def read(tmp_path, text: str, name: str = "rels.txt", drop: bool = False) -> list[Edge]:
    p = tmp_path / name
    p.write_text(text)
    return list(read_file(p, Mapper(default_mapping(), drop_unmapped=drop)))


def test_the_tuple_form_and_zeds_printed_form_read_the_same_edges(tmp_path):
    tuples = read(tmp_path, "group:1#member@group:2#membership\nresource:9#viewer_user@user:3\n")
    printed = read(tmp_path, "group:1 member group:2#membership\nresource:9 viewer_user user:3\n")
    assert [e[:3] for e in tuples] == [e[:3] for e in printed] == [
        ("group_child", "1", "2"), ("resource_viewer_user", "9", "3")]
    assert tuples[1].where.endswith("rels.txt:2")


def test_blank_lines_comments_and_an_ellipsis_subject_relation_are_read(tmp_path):
    edges = read(tmp_path, "// exported\n\norganization:o1#admin@user:u1#...\n")
    assert [e[:3] for e in edges] == [("org_admin", "o1", "u1")]
    assert edges[0].where.endswith(":3")


def test_a_validation_file_reads_its_relationships_block_with_the_files_line_numbers(tmp_path):
    text = ("schema: |-\n  definition user {}\nrelationships: |-\n  resource:1#viewer_user@user:2\n"
            "  resource:1#org@organization:0\n")
    edges = read(tmp_path, text, "v.yaml")
    assert [(e.relation, e.where.rsplit(":", 1)[1]) for e in edges] == [
        ("resource_viewer_user", "4"), ("resource_org", "5")]


def test_a_generated_dataset_written_as_relationships_reads_back_relationship_for_relationship(tmp_path):
    ds = generate("tiny", tmp_path / "ds")
    defs = relation_defs("rebac")
    want, lines = Counter(), []
    for rel in ds.authz_relations():
        d = defs[rel]
        for o, s in zip(ds.table(rel)["object"], ds.table(rel)["subject"], strict=True):
            sub = f"{d.subject_type}:{s}" + (f"#{d.subject_relation}" if d.subject_relation else "")
            lines.append(f"{d.object_type}:{o}#{d.relation}@{sub}")
            want[(rel, str(o), str(s))] += 1
    got = Counter(e[:3] for e in read(tmp_path, "\n".join(lines) + "\n"))
    assert got == want and sum(want.values()) > 1000


@pytest.mark.parametrize(("text", "reason"), [
    ("resource:1#viewer_user\n", r"rels\.txt:1: malformed row: .* is neither type:id#relation@type:id"),
    ("resource:1#viewer_user@\n", r"rels\.txt:1: malformed row: .* is not type:id#relation@type:id"),
    ("resource:1 viewer_user\n", r"rels\.txt:1: malformed row: .* is neither"),
    ("resource1#viewer_user@user:2\n", "rels.txt:1: malformed row"),
    ("resource:1#viewer_user@user:2\nresource:1#viewer_user@user2\n", r"rels\.txt:2: malformed row"),
    ("resource:1#viewer_user@user:2[ip_allowed]\n", "rels.txt:1: caveat or condition 'ip_allowed'"),
    ('resource:1#viewer_user@user:2[ip:{"a":1}]\n', "rels.txt:1: caveat or condition 'ip:{\"a\":1}'"),
    ("resource:1#viewer_user@user:2[expiration:2030-01-01T00:00:00Z]\n", "caveat or condition 'expiration"),
    ("doc:1#owner@user:2\n", "rels.txt:1: no mapping for doc#owner@user"),
    ("resource:1#viewer_user@user:*\n", "rels.txt:1: a wildcard subject on resource_viewer_user"),
])
def test_each_bad_line_is_refused_in_one_line_naming_the_file_and_line(tmp_path, text, reason):
    with pytest.raises(UserError, match=reason) as e:
        read(tmp_path, text)
    assert "\n" not in str(e.value)


def test_unmapped_lines_are_dropped_and_counted_when_asked_and_malformed_ones_still_refused(tmp_path):
    p = tmp_path / "rels.txt"
    p.write_text("doc:1#owner@user:2\ndoc:2#owner@user:2\nresource:1#viewer_user@user:2\n")
    m = Mapper(default_mapping(), drop_unmapped=True)
    assert [e.relation for e in read_file(p, m)] == ["resource_viewer_user"]
    assert sum(m.dropped.values()) == 2
    with pytest.raises(UserError, match="malformed"):
        read(tmp_path, "resource:1#viewer_user@\n", drop=True)


def test_a_zed_backup_a_binary_file_a_missing_file_and_a_yaml_without_relationships_are_one_line(tmp_path):
    (tmp_path / "b.zedbackup").write_bytes(b"Obj\x01\x04\x14avro.codec")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "v.yaml").write_text("schema: x\n")
    (tmp_path / "bad.yaml").write_text("relationships: [\n")
    m = Mapper(default_mapping())
    for name, reason in [("b.zedbackup", "a `zed backup` file"), ("bin.txt", "not UTF-8"),
                         ("none.txt", "cannot read it"), ("v.yaml", "needs a `relationships:` block"),
                         ("bad.yaml", "not YAML")]:
        with pytest.raises(UserError, match=reason):
            list(read_file(tmp_path / name, m))
