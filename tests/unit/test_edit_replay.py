"""The engines' write test reads, between full comparisons, only the users a step changed: it still fails on
a write the backend missed and on a stray change to a user the step should not have touched."""

from __future__ import annotations

import pytest

from authzbench.generator import generate
from authzbench.systems.reference.adapter import ReferenceBackend
from tests.backends.edits import lookup_state, oracle_pairs, replay_edits


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return generate("tiny", tmp_path_factory.mktemp("d") / "tiny")


class Faithful(ReferenceBackend):
    """Every edit applied to the evaluator (the reference backend keeps ACL edits of scratch users apart)."""

    def write(self, rel):
        self._evaluator().add(*rel)

    def delete(self, rel):
        self._evaluator().remove(*rel)


def _replay(ds, cls) -> None:
    n = ds.entities["resource"]
    with cls({}, {"dataset_path": str(ds.path)}) as b:
        replay_edits(b, ds, lambda be: lookup_state(be, ds),
                     lambda d: {k: {(u, r) for u, r in v if r < n} for k, v in oracle_pairs(d).items()},
                     users_state=lambda be, users: lookup_state(be, ds, users))


def test_a_backend_that_applies_every_edit_passes_the_replay_read_user_by_user(tiny):
    _replay(tiny, Faithful)


def test_a_missed_membership_write_fails_the_replay_at_its_step(tiny):
    class MissesMembers(Faithful):
        def write(self, rel):
            if rel.relation != "group_member":
                super().write(rel)

    with pytest.raises(AssertionError, match="after write Relationship"):
        _replay(tiny, MissesMembers)


def test_a_stray_change_to_an_untouched_user_fails_the_replay_at_the_next_full_comparison(tiny):
    stray = tiny.entities["user"] + 2  # a user id no step touches

    class GrantsAStranger(Faithful):  # an ACL write also grants a stranger a view they should not have
        def write(self, rel):
            super().write(rel)
            if rel.relation == "resource_viewer_user":
                super().write(type(rel)("resource_viewer_user", rel.object, stray))

    with pytest.raises(AssertionError, match=rf"extra \[\({stray}, "):
        _replay(tiny, GrantsAStranger)
