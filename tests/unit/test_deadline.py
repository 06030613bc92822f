"""The client-side op deadline: a read blocked on a server that never answers ends at the deadline."""

from __future__ import annotations

import socket
import time

from authzbench.backends.deadline import Watchdog


def test_a_read_blocked_past_the_deadline_is_ended_by_shutting_the_socket():
    with socket.create_server(("127.0.0.1", 0)) as srv, socket.create_connection(srv.getsockname()) as c:
        wd = Watchdog(0.3, c.fileno)
        seq = wd.arm()
        t0 = time.monotonic()
        assert c.recv(1) == b""  # the server never sends; the watchdog's shutdown ends the read
        seconds = time.monotonic() - t0
        wd.disarm()
        wd.close()
    assert wd.fired(seq) and wd.tripped and 0.3 <= seconds < 2.0


def test_an_op_disarmed_in_time_is_left_alone():
    with socket.create_server(("127.0.0.1", 0)) as srv, socket.create_connection(srv.getsockname()) as c:
        wd = Watchdog(0.2, c.fileno)
        for _ in range(50):
            seq = wd.arm()
            wd.disarm()
        time.sleep(0.4)
        conn, _ = srv.accept()
        with conn:
            conn.sendall(b"x")
            assert c.recv(1) == b"x"  # the socket still works
        wd.close()
    assert not wd.fired(seq) and not wd.tripped
