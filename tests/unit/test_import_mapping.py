"""The mapping from a source's relations onto the model's (imports/mapping.py): the suite's own schema names
map with no file, a TOML file adds or replaces them, and every row that cannot be mapped is refused in one
line naming the source, row and reason, or counted when dropping is asked for."""

from __future__ import annotations

import pytest

from authzbench.core.errors import UserError
from authzbench.imports.edges import Edge
from authzbench.imports.mapping import Mapper, default_mapping, load_mapping, parse_key
from authzbench.schema.model import REBAC_RELATIONS, SOCIAL_RELATIONS


def test_the_default_mapping_is_every_relation_def_under_its_schema_key():
    m = default_mapping()
    assert sorted(m.relations.values()) == sorted(REBAC_RELATIONS)
    assert m.relations[("group", "member", "group", "membership")] == "group_child"
    assert m.relations[("resource", "viewer_user", "user", "")] == "resource_viewer_user"


def test_renames_apply_to_relations_and_subject_relations():
    m = default_mapping("social", {"self": "identity"})
    assert m.relations[("user", "identity", "user", "")] == "user_self"
    assert ("user", "self", "user", "") not in m.relations
    assert len(m.relations) == len(SOCIAL_RELATIONS)


def test_a_suite_row_maps_to_its_edge_with_the_source_ids():
    e = Mapper(default_mapping()).edge(("group", "g1"), "member", ("group", "g2", "membership"), "f:3")
    assert e == Edge("group_child", "g1", "g2", "f:3")


def test_an_unmapped_row_is_refused_naming_where_and_the_key():
    with pytest.raises(UserError, match=r"^rels\.txt:7: no mapping for doc#owner@user .*--drop-unmapped"):
        Mapper(default_mapping()).edge(("doc", "1"), "owner", ("user", "a", ""), "rels.txt:7")


def test_dropping_counts_unmapped_rows_by_key_and_reason():
    m = Mapper(default_mapping(), drop_unmapped=True)
    for i in range(3):
        assert m.edge(("doc", str(i)), "owner", ("user", "a", ""), f"f:{i}") is None
    assert m.edge(("resource", "1"), "viewer_user", ("user", "a", ""), "f:9", caveat="ip") is None
    assert dict(m.dropped) == {"doc#owner@user: no mapping for doc#owner@user": 3,
                               "resource#viewer_user@user: caveat or condition 'ip': the model has none": 1}


def test_a_caveated_row_is_refused():
    with pytest.raises(UserError, match="f:2: caveat or condition .only_weekdays.: the model has none; "
                                        "--drop-unmapped drops such rows"):
        Mapper(default_mapping()).edge(("resource", "1"), "viewer_user", ("user", "a", ""), "f:2",
                                       caveat="only_weekdays")


def test_a_wildcard_subject_on_a_plain_relation_is_refused_and_a_plain_one_on_a_wildcard_relation():
    with pytest.raises(UserError, match="f:1: a wildcard subject on resource_viewer_user"):
        Mapper(default_mapping()).edge(("resource", "1"), "viewer_user", ("user", "*", ""), "f:1")
    with pytest.raises(UserError, match="f:2: a subject that is not a wildcard on user_public"):
        Mapper(default_mapping("social")).edge(("user", "1"), "visibility", ("user", "5", ""), "f:2")
    e = Mapper(default_mapping("social")).edge(("user", "1"), "visibility", ("user", "*", ""), "f:3")
    assert e is not None and e.relation == "user_public"


def test_an_empty_id_is_malformed_even_when_dropping():
    with pytest.raises(UserError, match="f:4: malformed row: empty object id"):
        Mapper(default_mapping(), drop_unmapped=True).edge(("resource", ""), "org", ("organization", "1", ""),
                                                           "f:4")


def test_a_mapping_file_adds_to_the_schema_names(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text('[relations]\n"team#member@user" = "group_member"\n"doc#viewer@team#member" = '
                 '"resource_viewer_group"\n')
    m = load_mapping(p)
    assert m.relations[("team", "member", "user", "")] == "group_member"
    assert m.relations[("doc", "viewer", "team", "member")] == "resource_viewer_group"
    assert m.relations[("group", "member", "user", "")] == "group_member"
    assert m.describe()["origin"] == "m.toml (2 entries, with the schema names)"


def test_defaults_false_keeps_only_the_files_entries(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text('defaults = false\n[relations]\n"team#member@user" = "group_member"\n')
    m = load_mapping(p)
    assert m.relations == {("team", "member", "user", ""): "group_member"}
    with pytest.raises(UserError, match="no mapping for group#member@user"):
        Mapper(m).edge(("group", "1"), "member", ("user", "2", ""), "f:1")


@pytest.mark.parametrize(("text", "reason"), [
    ("[relations\n", r"m\.toml: not TOML"),
    ('colour = "red"\n', "m.toml: unknown key 'colour'"),
    ('model = "chess"\n', "m.toml: model 'chess'; valid: rebac, social"),
    ('defaults = "yes"\n', "`defaults` must be true or false"),
    ('[relations]\n"team-member-user" = "group_member"\n', "'team-member-user' is not type#relation@"),
    ('[relations]\n"team#member@user" = "team_member"\n',
     "'team_member': not a rebac relation; valid: org_admin"),
    ('defaults = false\n', "maps nothing"),
])
def test_each_mistake_in_a_mapping_file_is_one_line_naming_it(tmp_path, text, reason):
    p = tmp_path / "m.toml"
    p.write_text(text)
    with pytest.raises(UserError, match=reason) as e:
        load_mapping(p)
    assert "\n" not in str(e.value)


def test_a_missing_mapping_file_is_one_line(tmp_path):
    with pytest.raises(UserError, match="mapping .*nope.toml: cannot read it"):
        load_mapping(tmp_path / "nope.toml")


def test_a_key_is_parsed_with_and_without_a_subject_relation():
    assert parse_key("doc#viewer@team#member") == ("doc", "viewer", "team", "member")
    assert parse_key("doc#viewer@user") == ("doc", "viewer", "user", "")
    assert parse_key("doc:1#viewer@user") is None
