"""free_port: the ports servers are started on."""

import socket

from authzbench.provision import base


def test_ports_come_from_below_the_ephemeral_range_and_never_twice():
    low = base._ephemeral_low()
    ports = [base.free_port() for _ in range(60)]
    assert len(set(ports)) == len(ports)
    assert all(10000 <= p < low for p in ports)


def test_a_port_someone_holds_is_not_handed_out(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        picks = iter([taken, taken, 12345])
        monkeypatch.setattr(base.random, "randrange", lambda a, b: next(picks))
        monkeypatch.setattr(base, "_ephemeral_low", lambda: 65536)
        monkeypatch.setattr(base, "_given_ports", set())
        assert base.free_port() == 12345
