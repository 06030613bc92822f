"""`authzbench import`: the reference suite's CSVs read into the dataset format, every bad input refused in
one line naming its file and row before anything is written, --drop-unmapped counting what it dropped,
--anonymize keeping nothing of the source's ids, and a generated graph surviving the round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from authzbench.cli import main
from authzbench.core.errors import UserError
from authzbench.generator import generate
from authzbench.imports.graph import ID_MAP, source_ids, write_graph
from authzbench.imports.readers import origin, reader
from authzbench.schema.model import relation_defs
from authzbench.truth.oracle import Oracle
from tests.unit.import_helpers import write_csvs, write_reference_csv

# One org, two users, two groups (g2 nested in g1), one resource shared with u1 and with g1.
GOOD = dict(
    organizations=["o1"], users=["alice,o1", "bob,o1"],
    org_memberships=["o1,alice,admin", "o1,bob,member"],
    groups=["g1,o1", "g2,o1"], group_memberships=["g1,alice,direct_manager", "g2,bob,direct_member"],
    group_hierarchy=["g1,g2,member_group"], resources=["r1,o1"],
    resource_acl=["r1,user,alice,viewer_user", "r1,group,g1,manager_group"])


def _import(src: Path, out: Path, *, drop: bool = False, anonymize: bool = False):
    return write_graph(reader("reference-csv").edges(src), out, origin("reference-csv", src),
                       drop_unmapped=drop, anonymize=anonymize)


def _refused(tmp_path: Path, **changes: list[str]) -> str:
    src = write_csvs(tmp_path / "src", **{**GOOD, **changes})
    with pytest.raises(UserError) as e:
        _import(src, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*")), "nothing is written"
    return str(e.value)


def test_a_small_graph_maps_every_column_onto_the_models_relations(tmp_path):
    ds = _import(write_csvs(tmp_path / "src", **GOOD), tmp_path / "out")
    ids = source_ids(ds)
    named = {rel: {(ids[d.object_type][o], ids[d.subject_type][s])
                   for o, s in zip(ds.table(rel)["object"], ds.table(rel)["subject"], strict=True)}
             for rel, d in relation_defs("rebac").items()}
    assert named["org_admin"] == {("o1", "alice")}
    assert named["org_member"] == {("o1", "alice"), ("o1", "bob")}, "an admin is a member (the reference's)"
    assert named["group_manager"] == {("g1", "alice")} and named["group_member"] == {("g2", "bob")}
    assert named["group_child"] == {("g1", "g2")}
    assert named["resource_viewer_user"] == {("r1", "alice")}
    assert named["resource_manager_group"] == {("r1", "g1")}
    assert ds.entities == {"group": 2, "organization": 1, "resource": 1, "user": 2}
    assert ds.profile == "imported" and ds.manifest["params"] == {}
    o = ds.manifest["origin"]
    assert o["format"] == "reference-csv" and o["anonymized"] is False and o["dropped"] == {}
    assert set(o["files"]) == {f"{n}.csv" for n in GOOD} and all(len(h) == 64 for h in o["files"].values())


def test_an_unknown_role_is_refused_naming_file_and_row(tmp_path):
    msg = _refused(tmp_path, org_memberships=["o1,alice,admin", "o1,bob,owner"])
    assert msg.startswith("org_memberships.csv:3: relation 'org_memberships.role=owner' has no relation")


def test_a_manager_group_nesting_is_refused_as_the_model_cannot_hold_it(tmp_path):
    msg = _refused(tmp_path, group_hierarchy=["g1,g2,manager_group"])
    assert msg.startswith("group_hierarchy.csv:2: relation 'group_hierarchy.relation=manager_group'")


def test_an_unknown_acl_subject_type_is_refused(tmp_path):
    assert _refused(tmp_path, resource_acl=["r1,team,t1,viewer_user"]).startswith("resource_acl.csv:2:")


def test_a_row_with_a_missing_column_is_refused_as_malformed(tmp_path):
    assert _refused(tmp_path, groups=["g1,o1", "g2"]).startswith(
        "groups.csv:3: 1 columns, expected 2 (group_id,org_id)")


def test_an_empty_value_is_refused_as_malformed(tmp_path):
    assert _refused(tmp_path, resources=["r1,"]).startswith("resources.csv:2: an empty value")


def test_a_wrong_header_is_refused(tmp_path):
    src = write_csvs(tmp_path / "src", **GOOD)
    (src / "users.csv").write_text("id,org\nalice,o1\n")
    with pytest.raises(UserError, match=r"^users.csv:1: header is \['id', 'org'\], expected user_id"):
        _import(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_missing_file_is_refused_before_any_is_read(tmp_path):
    src = write_csvs(tmp_path / "src", **GOOD)
    (src / "resource_acl.csv").unlink()
    with pytest.raises(UserError, match="no resource_acl.csv"):
        origin("reference-csv", src)


def test_a_member_missing_from_users_csv_is_a_dangling_reference(tmp_path):
    msg = _refused(tmp_path, group_memberships=["g2,carol,direct_member"])
    assert msg.startswith("group_memberships.csv:2: user 'carol' is not in users.csv")


def test_a_membership_of_an_undeclared_org_is_a_dangling_reference(tmp_path):
    msg = _refused(tmp_path, org_memberships=["o9,alice,member"])
    assert msg.startswith("org_memberships.csv:2: organization 'o9' is not in organizations.csv")


def test_a_group_with_no_org_is_a_dangling_reference(tmp_path):
    msg = _refused(tmp_path, group_memberships=["g3,bob,direct_member"])
    assert msg.startswith("group_memberships.csv:2: group 'g3' has no group_org row")


def test_an_acl_on_a_resource_with_no_org_is_a_dangling_reference(tmp_path):
    msg = _refused(tmp_path, resource_acl=["r2,user,bob,viewer_user"])
    assert msg.startswith("resource_acl.csv:2: resource 'r2' has no resource_org row")


def test_a_group_in_two_orgs_is_refused(tmp_path):
    msg = _refused(tmp_path, organizations=["o1", "o2"], groups=["g1,o1", "g2,o1", "g1,o2"])
    assert msg.startswith("groups.csv:4: group 'g1' already belongs to organization 'o1' (groups.csv:2)")


def test_a_cycle_in_the_group_hierarchy_is_refused_naming_it(tmp_path):
    msg = _refused(tmp_path, groups=["g1,o1", "g2,o1", "g3,o1"],
                   group_hierarchy=["g1,g2,member_group", "g2,g3,member_group", "g3,g1,member_group"])
    assert msg.startswith("group_hierarchy.csv:4: the group hierarchy has a cycle: g1 -> g2 -> g3 -> g1")


def test_a_group_nested_in_itself_is_a_cycle(tmp_path):
    assert "cycle: g1 -> g1" in _refused(tmp_path, group_hierarchy=["g1,g1,member_group"])


def test_drop_unmapped_keeps_going_and_counts_each_reason(tmp_path):
    src = write_csvs(tmp_path / "src", **{
        **GOOD, "group_hierarchy": ["g1,g2,manager_group", "g1,g2,member_group", "g2,g1,member_group"],
        "groups": ["g1,o1", "g2,o1", "g2"],
        "group_memberships": ["g2,bob,direct_member", "g2,carol,direct_member", "g7,bob,direct_member"]})
    ds = _import(src, tmp_path / "out", drop=True)
    assert ds.manifest["origin"]["dropped"] == {"unmapped": 1, "malformed": 1, "undeclared": 1, "no owner": 1,
                                                "cycle": 1}
    assert ds.counts["group_child"] == 1 and ds.counts["group_member"] == 1


def test_the_cli_refuses_bad_input_in_one_line_with_exit_2_and_writes_nothing(tmp_path, capsys):
    src = write_csvs(tmp_path / "src", **{**GOOD, "resource_acl": ["r1,user,alice,owner"]})
    code = main(["import", "--format", "reference-csv", "--path", str(src), "--out", "x",
                 "--data-dir", str(tmp_path / "data")])
    out = capsys.readouterr()
    lines = (out.out + out.err).strip().splitlines()
    assert code == 2 and len(lines) == 1 and "resource_acl.csv:2:" in lines[0]
    assert not (tmp_path / "data" / "x").exists()


def test_the_cli_writes_the_dataset_into_the_data_dir(tmp_path, capsys):
    src = write_csvs(tmp_path / "src", **GOOD)
    assert main(["import", "--format", "reference-csv", "--path", str(src), "--out", "mine",
                 "--data-dir", str(tmp_path / "data")]) == 0
    assert (tmp_path / "data" / "mine" / "COMPLETE").is_file()


def test_anonymized_output_holds_none_of_the_source_ids_and_no_id_map(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTHZBENCH_ANONYMIZE_KEY", "test-key")
    ds = _import(write_csvs(tmp_path / "src", **GOOD), tmp_path / "out", anonymize=True)
    assert not (ds.path / ID_MAP).exists() and source_ids(ds) is None
    blob = b"".join(p.read_bytes() for p in ds.path.iterdir())
    for ident in (b"alice", b"bob", b"g1", b"r1", b"o1"):
        assert ident not in blob
    assert ds.manifest["origin"]["anonymized"] is True


def test_anonymize_is_stable_across_imports_and_follows_the_key(tmp_path, monkeypatch):
    src = write_csvs(tmp_path / "src", **GOOD)
    monkeypatch.setenv("AUTHZBENCH_ANONYMIZE_KEY", "k1")
    a, b = _import(src, tmp_path / "a", anonymize=True), _import(src, tmp_path / "b", anonymize=True)
    assert a.hash == b.hash
    monkeypatch.setenv("AUTHZBENCH_ANONYMIZE_KEY", "k2")
    c = _import(src, tmp_path / "c", anonymize=True)
    assert c.manifest["origin"]["anonymize_key_id"] != a.manifest["origin"]["anonymize_key_id"]


def test_anonymize_orders_ids_by_hash_not_by_the_source(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTHZBENCH_ANONYMIZE_KEY", "k1")
    extra = [f"u{i:03d}" for i in range(50)]
    src = write_csvs(tmp_path / "src", **{**GOOD, "users": GOOD["users"] + [f"{u},o1" for u in extra],
                                          "org_memberships": GOOD["org_memberships"] + [
                                              f"o1,{u},{'admin' if i < 10 else 'member'}"
                                              for i, u in enumerate(extra)]})
    plain, anon = _import(src, tmp_path / "plain"), _import(src, tmp_path / "anon", anonymize=True)
    admins = plain.table("org_admin")["subject"].tolist()
    assert admins == [0, *range(2, 12)], "plain: alice, bob, then u000.. in the source's order"
    assert anon.counts == plain.counts
    assert anon.table("org_admin")["subject"].tolist() != admins, "anonymized: the order is the hash's"


def test_a_generated_tiny_graph_survives_the_csv_round_trip(tmp_path):
    ds = generate("tiny", tmp_path / "gen")
    back = _import(write_reference_csv(ds, tmp_path / "csv"), tmp_path / "back")
    assert back.entities == ds.entities
    for rel in relation_defs("rebac"):
        a, b = ds.table(rel), back.table(rel)
        assert a.to_dict("list") == b.to_dict("list"), rel
    oa, ob = Oracle(ds), Oracle(back)
    for perm in ("manage", "view"):
        assert np.array_equal(oa.count_by_user(perm), ob.count_by_user(perm))
    users = range(ds.entities["user"])
    assert all(oa.lookup_resources(u, "view") == ob.lookup_resources(u, "view") for u in users)


def test_an_out_dir_that_is_not_a_dataset_is_refused_not_replaced(tmp_path, capsys):
    src = write_csvs(tmp_path / "src", **GOOD)
    keep = tmp_path / "data" / "mine"
    keep.mkdir(parents=True)
    (keep / "notes.txt").write_text("mine")
    code = main(["import", "--format", "reference-csv", "--path", str(src), "--out", "mine",
                 "--data-dir", str(tmp_path / "data")])
    assert code == 2 and "exists and is not a dataset" in capsys.readouterr().err
    assert (keep / "notes.txt").read_text() == "mine"
