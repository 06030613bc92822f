"""`baseline` is the reference report's dataset: its totals and skew, so their tables compare."""

from __future__ import annotations

import numpy as np
import pytest

from authzbench.generator import generate
from authzbench.workloads.stats import REFERENCE_TOTALS, totals


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    return generate("baseline", tmp_path_factory.mktemp("b") / "ds")


@pytest.mark.parametrize("what", list(REFERENCE_TOTALS))
def test_every_baseline_total_is_within_10_percent_of_the_reference(baseline, what):
    got, ref = totals(baseline)[what], REFERENCE_TOTALS[what]
    assert abs(got - ref) <= 0.10 * ref, f"{what}: {got:,} vs reference {ref:,}"


def test_baseline_keeps_the_reference_skew(baseline):
    """Reference: heaviest user 875 direct ACL entries, largest group 306 direct members."""
    direct = np.concatenate([baseline.table(r)["subject"].to_numpy()
                             for r in ("resource_manager_user", "resource_viewer_user")])
    members = np.bincount(baseline.table("group_member")["object"].to_numpy())
    assert 0.75 * 875 <= np.bincount(direct).max() <= 1.25 * 875
    assert 0.75 * 306 <= members.max() <= 1.25 * 306


def test_the_previous_shape_stays_available_as_baseline_v1(tmp_path):
    ds = generate("baseline-v1", tmp_path / "v1")
    assert ds.entities == {"organization": 16, "user": 1600, "group": 320, "resource": 32000}
    assert ds.total_relationships == 524_637


def test_large_and_xl_are_10x_and_100x_the_calibrated_baseline():
    from authzbench.generator.profiles import PROFILES

    assert PROFILES["large"].orgs == 10 * PROFILES["baseline"].orgs
    assert PROFILES["xl"].orgs == 100 * PROFILES["baseline"].orgs
    assert PROFILES["large"].resources_per_org == PROFILES["baseline"].resources_per_org
