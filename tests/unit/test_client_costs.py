"""The client's cheap costs cut (issue 67 item 9) keep every answer compared with the oracle's: a lookup's
expected answer made a frozenset once a phase, compared as the list was."""

from __future__ import annotations

import pytest

from authzbench.measure import worker
from authzbench.measure.timing import OpCounters, Timed


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
        assert (
            c.examples[0]["got"] == {"count": 3, "missing": 1, "extra": 1} and c.examples[0]["expected"] == 3)
    assert _counted(("check", (1, "view", 2), False), True).mismatches == 1  # type: ignore[arg-type]


class _Stub:
    """A SpiceDB stub or a Permify Api that records what it was sent (no server)."""

    def __init__(self) -> None:
        self.sent: list = []

    def CheckPermission(self, req, timeout: float, metadata: tuple):  # noqa: N802 - the stub's name
        from authzed.api.v1 import CheckPermissionResponse

        self.sent.append(req)
        return CheckPermissionResponse(permissionship=CheckPermissionResponse.PERMISSIONSHIP_HAS_PERMISSION)

    def message(self, name: str, **fields: object) -> dict:
        return {"name": name, **fields}

    def send(self, name: str, msg: dict):
        self.sent.append(msg)
        return type("Resp", (), {"can": 1})()


def _spicedb():
    from authzbench.systems.spicedb.adapter import SpiceDBBackend

    b = SpiceDBBackend({"datastore": "postgres"})
    b.client, b._md, b.timeout, b.mode, b.model = _Stub(), (), 1.0, "at_least_as_fresh", "rebac"
    return b


def test_spicedb_sends_the_same_prebuilt_request_again_and_a_new_one_after_a_write_token():
    from authzed.api.v1 import ZedToken

    b = _spicedb()
    assert b.check(1, "view", 2) and b.check(1, "view", 2) and b.check(1, "view", 3)
    sent = b.client.sent
    assert sent[0] is sent[1] and sent[2] is not sent[0] and sent[2].resource.object_id == "3"
    assert sent[0] == b.check_request(1, "view", 2)  # the request check() built per call before
    b.token = ZedToken(token="t1")
    b.check(1, "view", 2)
    assert sent[3].consistency.at_least_as_fresh.token == "t1"  # the token is part of what is prebuilt
    b.check(1, "view", 2, mode="fully_consistent")
    assert sent[4].consistency.fully_consistent


def test_permify_sends_a_prebuilt_message_per_arguments_and_snap_token():
    from authzbench.backends.zanzibar import Prebuilt
    from authzbench.systems.permify.adapter import PermifyBackend

    b = PermifyBackend({"url": "x"})
    b.api, b.mode, b.model, b.tenant, b.allowed, b._prebuilt = (
        _Stub(), "at_least_as_fresh", "rebac", "t", 1, Prebuilt())
    assert b.check(1, "view", 2) and b.check(1, "view", 2)
    b.token = "snap"
    b.check(1, "view", 2)
    sent = b.api.sent
    assert sent[0] is sent[1] and sent[2]["metadata"]["snap_token"] == "snap"
    assert sent[0] == {"name": "Permission.Check", **b.check_fields(1, "view", 2, "minimize_latency")}


def test_the_prebuilt_cache_is_emptied_at_its_limit():
    from authzbench.backends.zanzibar import Prebuilt

    p = Prebuilt()
    p.LIMIT = 2
    made = [p.get((k,), object) for k in range(3)]
    assert p.get((2,), object) is made[2] and p.get((0,), object) is not made[0]


def test_an_open_loop_op_records_its_service_time_beside_its_latency_from_the_intended_start():
    from authzbench.core.metrics import decode

    c = OpCounters()
    # intended at 0, sent 5 ms late, answered 1 ms after the send
    c.add(("check", (1, "view", 2), True), Timed(True, None, 5_000_000, 6_000_000), begin_ns=0, late=True)
    p = c.payload()
    assert decode(p["hist"]).get_value_at_percentile(50) == pytest.approx(6000, rel=0.01)
    assert decode(p["service_hist"]).get_value_at_percentile(50) == pytest.approx(1000, rel=0.01)
    closed = OpCounters()
    closed.add(("check", (1, "view", 2), True), Timed(True, None, 5_000_000, 6_000_000))
    assert closed.payload()["service_hist"] is None  # a closed loop's latency is its service time


def test_an_interval_record_carries_the_service_histogram():
    from authzbench.core.records import Interval

    p = OpCounters().payload()
    iv = Interval(phase="p", backend="b", scenario="s", worker=0, kind="check", **p)
    assert iv.service_hist is None
