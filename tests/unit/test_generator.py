"""Dataset generation: determinism, shape, bad input."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from authzbench.core.errors import UserError
from authzbench.generator import generate
from authzbench.schema.dataset import Dataset
from authzbench.truth.oracle import Oracle


def test_same_profile_and_seed_give_byte_identical_files(tmp_path):
    a = generate("tiny", tmp_path / "a", seed=3)
    b = generate("tiny", tmp_path / "b", seed=3)
    for rel in a.relations():
        assert a.file(rel).read_bytes() == b.file(rel).read_bytes()
    assert a.hash == b.hash
    assert generate("tiny", tmp_path / "c", seed=4).hash != a.hash


def test_tiny_has_a_few_thousand_relationships_and_every_kind(tmp_path):
    ds = generate("tiny", tmp_path / "t")
    assert 1000 <= ds.total_relationships <= 10000
    assert all(n > 0 for n in ds.counts.values())
    assert ds.manifest["content_hash"] == (tmp_path / "t" / "COMPLETE").read_text().strip()


def test_hierarchy_is_acyclic_and_nested_at_least_three_deep_on_tiny(tmp_path):
    ds = generate("tiny", tmp_path / "t")
    edges = ds.table("group_child")
    assert (edges["object"] < edges["subject"]).all()  # parents precede children: no cycle
    parent_of = dict(zip(edges["subject"], edges["object"], strict=True))

    def depth(g: int) -> int:
        return 1 + depth(parent_of[g]) if g in parent_of else 1

    assert max(depth(g) for g in parent_of) >= 3


def test_baseline_is_skewed_like_the_reference(tmp_path):
    ds = generate("baseline-v1", tmp_path / "b")  # the pre-calibration shape these bounds were set for
    user_orgs = ds.table("org_member").groupby("subject").size()
    assert user_orgs.min() >= 1 and user_orgs.max() <= 8
    assert 1.6 <= user_orgs.mean() <= 2.4
    members = ds.table("group_member").groupby("object").size()
    assert members.max() >= 150  # a few very large groups (reference: 306)
    direct = np.concatenate(
        [ds.table("resource_manager_user")["subject"], ds.table("resource_viewer_user")["subject"]])
    per_user = np.bincount(direct)
    assert per_user.max() >= 10 * np.median(per_user[per_user > 0])  # heavy users hold hundreds+


def test_overrides_change_the_shape(tmp_path):
    ds = generate("tiny", tmp_path / "o", overrides={"resources_per_org": "10"})
    assert ds.entities["resource"] == 3 * 10


@pytest.mark.parametrize(
    "profile,overrides,message",
    [
        ("huge", {}, "unknown profile 'huge'"),
        ("tiny", {"orgs": "0"}, "orgs must be > 0"),
        ("tiny", {"admins_per_org": "-1"}, "admins_per_org must be >= 0"),
        ("tiny", {"nope": "1"}, "unknown --set key 'nope'"),
        ("tiny", {"orgs": "many"}, "expected a int"),
    ],
)
def test_bad_input_is_a_one_line_user_error(tmp_path, profile, overrides, message):
    with pytest.raises(UserError, match=message):
        generate(profile, tmp_path / "x", overrides=overrides)
    assert not (tmp_path / "x").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_data_dir_is_a_user_error(tmp_path):
    tmp_path.chmod(0o500)
    with pytest.raises(UserError, match="cannot write"):
        generate("tiny", tmp_path / "x")


def test_unwritable_data_dir_is_a_user_error_even_as_root(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    with pytest.raises(UserError, match="cannot write"):
        generate("tiny", blocker / "x")


def test_interrupted_generation_leaves_no_complete_looking_dataset(tmp_path, monkeypatch):
    from authzbench.generator import rebac

    def boom(params, emit):
        emit("org_member", np.array([0], np.int32), np.array([0], np.int32))
        raise KeyboardInterrupt

    monkeypatch.setattr(rebac, "generate", boom)
    with pytest.raises(KeyboardInterrupt):
        generate("tiny", tmp_path / "k")
    assert not (tmp_path / "k").exists()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UserError, match="no dataset"):
        Dataset.open(tmp_path / "k")


def test_manifest_records_profile_seed_counts_and_hash(tmp_path):
    ds = generate("tiny", tmp_path / "m", seed=9)
    m = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert m["profile"] == "tiny" and m["seed"] == 9 and m["counts"] == ds.counts
    assert len(m["content_hash"]) == 64


def test_oracle_agrees_with_a_naive_evaluation_on_tiny(tmp_path):
    ds = generate("tiny", tmp_path / "n")
    o = Oracle(ds)
    t = {r: list(zip(ds.table(r)["object"], ds.table(r)["subject"], strict=True)) for r in ds.relations()}
    children: dict[int, list[int]] = {}
    for p, c in t["group_child"]:
        children.setdefault(p, []).append(c)

    def members(g: int, seen: frozenset = frozenset()) -> set[int]:
        if g in seen:
            return set()
        out = {u for gg, u in t["group_member"] + t["group_manager"] if gg == g}
        for c in children.get(g, []):
            out |= members(c, seen | {g})
        return out

    org = dict(t["resource_org"])
    for r in range(ds.entities["resource"]):
        manage = {u for rr, u in t["resource_manager_user"] if rr == r}
        manage |= {u for rr, g in t["resource_manager_group"] if rr == r for u in members(g)}
        manage |= {u for o_, u in t["org_admin"] if o_ == org[r]}
        view = manage | {u for rr, u in t["resource_viewer_user"] if rr == r}
        view |= {u for rr, g in t["resource_viewer_group"] if rr == r for u in members(g)}
        for u in range(ds.entities["user"]):
            assert o.check(u, "manage", r) == (u in manage)
            assert o.check(u, "view", r) == (u in view)


def test_a_dataset_made_with_other_parameters_is_made_again_not_reused(tmp_path):
    first = generate("tiny", tmp_path / "d", force=False)
    assert generate("tiny", tmp_path / "d", force=False).hash == first.hash  # same parameters: reused
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    manifest["params"]["acl_weight_cap"] = 1000.0  # as if made by an older generator default
    (tmp_path / "d" / "manifest.json").write_text(json.dumps(manifest))
    again = generate("tiny", tmp_path / "d", force=False)
    assert again.manifest["params"]["acl_weight_cap"] != 1000.0 and again.hash == first.hash


def test_heaviest_users_hold_thousands_not_half_of_all_resources(tmp_path):
    """Pareto activity capped for ACL picks: heavy users stand out, but none holds a share of every
    resource that no real tenant would (uncapped, one baseline user held 14,000 of 32,000)."""
    ds = generate("baseline-v1", tmp_path / "b")  # the pre-calibration shape these bounds were set for
    acl = np.concatenate([ds.table(r)["subject"].to_numpy() for r in ("resource_manager_user",
                                                                         "resource_viewer_user")])
    per_user = np.bincount(acl)
    share_top20 = np.sort(per_user)[::-1][: len(per_user) // 5].sum() / per_user.sum()
    assert per_user.max() <= 0.15 * ds.entities["resource"] and share_top20 >= 0.55
