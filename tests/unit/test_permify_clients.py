"""The pure parts of authzbench.systems.permify.tools.clients: how the list is cut into rounds and rotated,
how answers are compared, how overhead against the round trip is computed (no server, nothing timed)."""

from __future__ import annotations

from authzbench.measure.timing import OpCounters
from authzbench.systems.permify.tools.clients import (
    Client,
    Samples,
    chunks,
    failures,
    mismatches,
    render,
    rotated,
    run_block,
    summarize,
)


def _client(name: str, transport: str, roundtrip: bool = False) -> Client:
    return Client(name, transport, lambda c: None, roundtrip=roundtrip)


def _ops(latency_us: int, n: int) -> OpCounters:
    """n answered calls of latency_us each, as the measurement counts them."""
    ops = OpCounters()
    for _ in range(n):
        ops.ops += 1
        ops.hist.record_value(latency_us)
    return ops


def test_the_list_is_cut_into_consecutive_chunks_covering_every_input_once():
    cut = chunks(10, 3)
    assert [list(r) for r in cut] == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert chunks(2, 5) == [range(0, 1), range(1, 2)]  # never an empty round


def test_each_round_starts_with_the_next_client():
    cs = [_client(n, "REST") for n in "abc"]
    assert [[c.name for c in rotated(cs, i)] for i in range(4)] == [
        list("abc"), list("bca"), list("cab"), list("abc")]


def test_a_wrong_or_missing_answer_of_any_client_is_a_mismatch():
    inputs = [(1, "view", 2, True), (3, "manage", 4, False), (5, "view", 6, False)]
    agree = {"a": {0: True, 1: False, 2: False}, "b": {0: True, 1: False, 2: False}}
    assert mismatches(inputs, agree) == []
    bad = mismatches(inputs, {"a": {0: True, 1: True, 2: False}, "b": {0: True, 1: False}})
    assert bad == ["check(user 3, manage, resource 4): oracle=False, a=True, b=False",
                   "check(user 5, view, resource 6): oracle=False, a=False, b=None"]


def test_overhead_is_a_check_client_figure_minus_its_own_transports_round_trip():
    clients = [_client("rest", "REST"), _client("grpc", "gRPC"), _client("rest-rt", "REST", True),
               _client("grpc-rt", "gRPC", True)]
    ms = 1000  # µs: the histogram's unit (exact below 2,048 µs, 2 µs buckets up to 4,096)
    samples = {"rest": Samples(_ops(1900, 10), [400_000.0, 500_000.0, 450_000.0], [100_000.0]),
               "grpc": Samples(_ops(1500, 10), [200_000.0], []),
               "rest-rt": Samples(_ops(1 * ms, 10), [150_000.0], [50_000.0]),
               "grpc-rt": Samples(_ops(ms // 2, 10), [50_000.0], [])}
    samples["grpc"].cpu_ns = [200_000.0, 250_000.0, 300_000.0]
    rows = {r.client: r for r in summarize(clients, samples, ref="rest")}
    assert round(rows["rest"].over_p50_ms, 6) == 0.9 and rows["rest"].over_cpu_us == 300.0
    assert (rows["rest"].cpu_us, rows["rest"].cpu_lo_us, rows["rest"].cpu_hi_us) == (450.0, 400.0, 500.0)
    assert rows["grpc"].over_p50_ms == 1.0 and rows["grpc"].over_cpu_us == 200.0
    assert rows["grpc"].vs_ref == (0.5, 0.5, 0.6666666666666666)  # paired by round: 200/400, 250/500, 300/450
    assert rows["grpc"].server_us is None and rows["rest"].server_us == 100.0
    assert rows["rest-rt"].over_p50_ms is None  # a round trip is the floor, not measured against one
    table = render(list(rows.values()), ["context"], ref="rest")
    assert (
        "| rest | REST | 10 | 1.900 | 1.900 | 0.900 | 450 (400-500) | 300 | 1.00 (1.00-1.00) | 100 |" in table
    )
    assert "| grpc-rt | gRPC | 10 | 0.500 | 0.500 |  | 50 (50-50) |  |  |  |" in table


def test_each_call_of_a_block_is_timed_and_a_wrong_or_failed_answer_is_counted():
    inputs = [(1, "view", 2, True), (3, "view", 4, False), (5, "view", 6, True)]
    calls = iter([True, True, ConnectionError("gone")])

    def call(_):
        got = next(calls)
        if isinstance(got, Exception):
            raise got
        return got

    s = Samples()
    run_block(Client("c", "gRPC", call), inputs, range(3), s, None)
    assert s.ops.ops == 2 and s.ops.hist.get_total_count() == 2  # the failed call is counted, not timed
    assert s.ops.checked == 2 and s.ops.mismatches == 1  # (3, view, 4): the oracle says False
    assert s.answers == {0: True, 1: True} and len(s.cpu_ns) == 1
    assert failures("c", s) == ["c: 1 calls failed (0 timed out) ConnectionError: gone"]
    rt = Samples()
    run_block(Client("rt", "gRPC", lambda _: None, roundtrip=True), inputs, range(3), rt, None)
    # a round trip answers nothing
    assert rt.ops.ops == 3 and rt.ops.checked == 0 and failures("rt", rt) == []
