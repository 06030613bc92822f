"""The client's cheap costs cut (issue 67 item 9) keep every answer compared with the oracle's: a lookup's
expected answer made a frozenset once a phase, compared as the list was."""

from __future__ import annotations

from authzbench.scenarios import worker
from authzbench.scenarios.timing import OpCounters, Timed


class _Fake:
    def lookup_resources(self, *args: object) -> list[int]:
        return [3, 2, 1]

    def check(self, *args: object) -> bool:
        return True


def _counted(inp: tuple, answer: list[int]) -> OpCounters:
    c = OpCounters()
    c.add(inp, Timed(answer, None, 0, 1000))
    return c


def test_a_lookups_expected_answer_is_a_frozenset_made_once_before_the_measured_window():
    (kind, call, inp), (_, _, check) = worker._prepared(_Fake(), [("lookup", (1, "view"), [1, 2, 3]),
                                                                   ("check", (1, "view", 2), True)])
    assert kind == "lookup" and inp[2] == frozenset({1, 2, 3}) and isinstance(inp[2], frozenset)
    assert check == ("check", (1, "view", 2), True)
    assert _counted(inp, call()).mismatches == 0


def test_a_wrong_lookup_is_a_mismatch_with_its_counts_whether_expected_is_a_list_or_a_frozenset():
    for expected in ([1, 2, 3], frozenset({1, 2, 3})):
        c = _counted(("lookup", (1, "view"), expected), [2, 3, 4, 4])
        assert (c.mismatches, c.duplicates, c.results) == (1, 1, 4)
        assert c.examples[0]["got"] == {"count": 3, "missing": 1, "extra": 1} and c.examples[0]["expected"] == 3
    assert _counted(("check", (1, "view", 2), False), True).mismatches == 1  # type: ignore[arg-type]
