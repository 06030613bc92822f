"""The compact letter display (figures.letters) over random figures: sharing a letter is exactly being not
clearly apart, and a better figure never shows a later first letter (issue 67's 8 cases of a better figure
with a worse rank in 20261129-201802)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest

from authzbench.report.core.figures import clearly_better, letters, standing


@dataclass
class Fig:
    backend: str
    value: float
    lo: float
    hi: float
    assumed: str = ""

    def interval(self) -> tuple[float, float]:
        return self.lo, self.hi


def _random_figures(rng: random.Random) -> list[Fig]:
    """2-12 figures: narrow and wide intervals, some open above (⚠), some tied, some assumed."""
    out = []
    for i in range(rng.randint(2, 12)):
        v = round(rng.lognormvariate(0, 1.5), rng.choice([1, 3]))  # rounding makes ties
        lo, hi = v * rng.uniform(0.3, 1.0), v * rng.uniform(1.0, 3.0) ** rng.choice([0.1, 1, 2])
        if rng.random() < 0.1:
            hi = math.inf
        out.append(Fig(f"b{i}", v, lo, hi, "assumed: test" if rng.random() < 0.1 else ""))
    return out


def _apart(a: Fig, b: Fig, higher: bool) -> bool:
    return clearly_better(a, b, higher) or clearly_better(b, a, higher)


def _worse(a: Fig, b: Fig, higher: bool) -> bool:
    return a.value < b.value if higher else a.value > b.value


@pytest.mark.parametrize("seed", range(4))
def test_two_random_figures_share_a_letter_exactly_when_they_are_not_clearly_apart(seed):
    rng = random.Random(seed)
    for _ in range(500):
        figs, higher = _random_figures(rng), rng.random() < 0.5
        cld = letters(figs, higher)
        for a in figs:
            for b in figs:
                if a is not b:
                    assert bool(set(cld[a.backend]) & set(cld[b.backend])) == (not _apart(a, b, higher)), \
                        (figs, higher, cld)


@pytest.mark.parametrize("seed", range(4))
def test_a_better_random_figure_never_has_a_later_first_letter(seed):
    rng = random.Random(100 + seed)
    for _ in range(500):
        figs, higher = _random_figures(rng), rng.random() < 0.5
        cld = letters(figs, higher)
        best = max(figs, key=lambda f: f.value if higher else -f.value)
        assert cld[best.backend][0] == "a"
        for a in figs:
            for b in figs:
                if _worse(b, a, higher):
                    assert standing(cld[a.backend]) <= standing(cld[b.backend]), (figs, higher, cld)


def test_a_worse_figure_near_the_best_does_not_take_the_first_letter_from_a_better_one():
    """k [0-1] is clearly better than i [1.5-2]; j (5, [0.9-10]) is near both. Letters by first appearance of
    the sets {k, j}, {i, j} give j "ab" above i "b": j is reopened as a later letter instead."""
    k, i, j = Fig("k", 0.5, 0, 1), Fig("i", 1.8, 1.5, 2), Fig("j", 5, 0.9, 10)
    cld = letters([k, i, j], False)
    assert cld == {"k": "ac", "i": "b", "j": "bc"}


def test_an_assumed_interval_is_never_clearly_apart_however_far_the_values():
    a, b = Fig("a", 1.0, 0.9, 1.1, "assumed: one load"), Fig("b", 100.0, 99, 101)
    assert not clearly_better(a, b, True) and not clearly_better(b, a, True)
    assert letters([a, b], True) == {"a": "a", "b": "a"}
    assert clearly_better(Fig("a", 1.0, 0.9, 1.1), b, False)


def test_nan_figures_get_no_letter():
    assert letters([Fig("a", math.nan, 0, 1), Fig("b", 1.0, 0.5, 1.5)], False) == {"b": "a"}
