"""The pure parts of authzbench.tools.permify_clients: how the list is cut into rounds and rotated, how
answers are compared, how overhead against the round trip is computed (no server, nothing timed)."""

from __future__ import annotations

from authzbench.tools.permify_clients import Client, Samples, chunks, mismatches, render, rotated, summarize


def _client(name: str, transport: str, roundtrip: bool = False) -> Client:
    return Client(name, transport, lambda c: None, roundtrip=roundtrip)


def test_the_list_is_cut_into_consecutive_chunks_covering_every_input_once():
    cut = chunks(10, 3)
    assert [list(r) for r in cut] == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert chunks(2, 5) == [range(0, 1), range(1, 2)]  # never an empty round


def test_each_round_starts_with_the_next_client():
    cs = [_client(n, "REST") for n in "abc"]
    assert [[c.name for c in rotated(cs, i)] for i in range(4)] == [list("abc"), list("bca"), list("cab"), list("abc")]


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
    ms = 1_000_000
    samples = {"rest": Samples([3 * ms] * 10, [400_000.0, 500_000.0, 450_000.0], [100_000.0]),
               "grpc": Samples([2 * ms] * 10, [200_000.0], []),
               "rest-rt": Samples([1 * ms] * 10, [150_000.0], [50_000.0]),
               "grpc-rt": Samples([ms // 2] * 10, [50_000.0], [])}
    samples["grpc"].cpu_ns = [200_000.0, 250_000.0, 300_000.0]
    rows = {r.client: r for r in summarize(clients, samples, ref="rest")}
    assert rows["rest"].over_p50_ms == 2.0 and rows["rest"].over_cpu_us == 300.0
    assert (rows["rest"].cpu_us, rows["rest"].cpu_lo_us, rows["rest"].cpu_hi_us) == (450.0, 400.0, 500.0)
    assert rows["grpc"].over_p50_ms == 1.5 and rows["grpc"].over_cpu_us == 200.0
    assert rows["grpc"].vs_ref == (0.5, 0.5, 0.6666666666666666)  # paired by round: 200/400, 250/500, 300/450
    assert rows["grpc"].server_us is None and rows["rest"].server_us == 100.0
    assert rows["rest-rt"].over_p50_ms is None  # a round trip is the floor, not measured against one
    table = render(list(rows.values()), ["context"], ref="rest")
    assert "| rest | REST | 10 | 3.000 | 3.000 | 2.000 | 450 (400-500) | 300 | 1.00 (1.00-1.00) | 100 |" in table
    assert "| grpc-rt | gRPC | 10 | 0.500 | 0.500 |  | 50 (50-50) |  |  |  |" in table
