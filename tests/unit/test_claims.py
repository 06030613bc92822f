"""Each system declares what its model gives a user beyond the benchmark's checks, one claim per feature, and
a claim that names a test names one that exists (it exercises the claim against the real server)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from authzbench.systems import systems
from authzbench.systems.contract import FEATURES

ROOT = Path(__file__).resolve().parents[2]
SERVED = [n for n, s in systems().items() if not s.in_process]


@pytest.mark.parametrize("name", SERVED)
def test_every_served_system_declares_each_feature_once(name):
    assert [c.feature for c in systems()[name].claims] == list(FEATURES)
    assert all(c.how for c in systems()[name].claims), "each claim says how (or why not) in one line"


@pytest.mark.parametrize("name", SERVED)
def test_a_claim_names_only_a_test_that_exists(name):
    for c in systems()[name].claims:
        if not c.test:
            continue
        path, _, func = c.test.partition("::")
        tree = ast.parse((ROOT / path).read_text())
        assert func in {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}, c.test
