"""The postgres adapter's check as libpq's prepared call (issue 56): its binary answer read as the oracle's
boolean (a deny, a NULL and no row are all False, so a wrong answer is still seen), a failed call raised as
the failure it is, and only the deadline's or the server's statement_timeout turned into a TimeoutError."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import pq

from authzbench.systems.postgres.adapter import PostgresBackend, pq_placeholders


class _Result:
    def __init__(self, value: bytes | None, rows: int = 1, status: int = pq.ExecStatus.TUPLES_OK) -> None:
        self.value, self.ntuples, self.status = value, rows, status

    def get_value(self, row: int, col: int) -> bytes | None:
        return self.value

    def error_field(self, field: int) -> bytes | None:  # a failed result's SQLSTATE: undefined_table
        return b"42P01" if field == pq.DiagnosticField.SQLSTATE else b"relation does not exist"

    def get_error_message(self, encoding: str) -> str:
        return "relation does not exist"


class _PGconn:
    def __init__(self, result: _Result) -> None:
        self.result = result

    def prepare(self, name: bytes, query: bytes) -> _Result:
        return _Result(None, 0, pq.ExecStatus.COMMAND_OK)

    def exec_prepared(self, name: bytes, params: list, result_format: int = 0) -> _Result:
        return self.result


def _backend(result: _Result) -> PostgresBackend:
    b = PostgresBackend({"dsn": "postgresql://unused"}, {})
    b.conn, b._watchdog, b._statements = type("Conn", (), {"pgconn": _PGconn(result)})(), None, {}
    return b


@pytest.mark.parametrize(("value", "rows", "expected"), [(b"\x01", 1, True), (b"\x00", 1, False),
                                                          (None, 1, False), (None, 0, False)])
def test_a_checks_binary_answer_reads_as_allow_only_when_true(value, rows, expected):
    assert _backend(_Result(value, rows)).check(1, "view", 2) is expected


def test_libpq_placeholders_number_the_querys_parameters_in_order():
    assert pq_placeholders("SELECT %s WHERE a = %s AND b") == b"SELECT $1 WHERE a = $2 AND b"


class _Watchdog:
    timeout_s = 2.0

    def __init__(self, fired: bool) -> None:
        self._fired, self.armed = fired, 0

    def fired(self, seq: int) -> bool:
        return self._fired

    def arm(self) -> int:
        self.armed += 1
        return self.armed

    def disarm(self) -> None:
        self.armed -= 1


def test_only_the_deadline_or_the_servers_statement_timeout_become_timeouts():
    b = PostgresBackend({"dsn": "postgresql://unused"}, {})
    b._watchdog = _Watchdog(fired=False)
    other = psycopg.errors.UndefinedTable("no such table")
    assert b._op_error(1, other) is other
    assert isinstance(b._op_error(1, psycopg.errors.QueryCanceled("canceling statement")), TimeoutError)
    mine = ValueError("ours")
    assert b._op_error(1, mine) is mine
    b._watchdog = _Watchdog(fired=True)
    assert isinstance(b._op_error(1, psycopg.OperationalError("server closed the connection")), TimeoutError)
    assert b._op_error(None, other) is other  # no deadline armed: the error as it came


def test_a_failed_check_raises_the_servers_error_and_disarms_the_deadline():
    b = _backend(_Result(None, 0, pq.ExecStatus.FATAL_ERROR))
    b.conn.info = type("Info", (), {"encoding": "utf-8"})()
    b.conn.pgconn.status = pq.ConnStatus.OK
    b._watchdog = wd = _Watchdog(fired=False)
    b._watchdog.tripped = False
    with pytest.raises(psycopg.errors.UndefinedTable):
        b.check(1, "view", 2)
    assert wd.armed == 0
