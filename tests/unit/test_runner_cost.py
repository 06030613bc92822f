"""The runner's own cost per op (tools/runner_cost): measured through the bench's real loop, every answer
still compared with the oracle's."""

from __future__ import annotations

from authzbench.tools import runner_cost


def _shipped(sink: runner_cost._Sink) -> dict[str, int]:
    got = {"ops": 0, "checked": 0, "mismatches": 0}
    for _, _, kinds in sink.items:
        for k in got:
            got[k] += kinds["check"][k]
    return got


def test_runner_loop_compares_every_noop_answer_and_counts_the_wrong_ones() -> None:
    _, sink = runner_cost.runner_loop_us(2000)
    # the no-op answers True; the oracle expects False on every odd input: half the answers are wrong
    assert _shipped(sink) == {"ops": 2000, "checked": 2000, "mismatches": 1000}


def test_runner_cost_is_the_loop_less_the_bare_call() -> None:
    got = runner_cost.runner_cost(ops=2000, repeats=1)
    assert got["runner_us"] == got["loop_us"] - got["bare_us"]
    assert got["loop_us"] > got["bare_us"] > 0
