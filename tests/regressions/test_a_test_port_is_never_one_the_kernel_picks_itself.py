"""CI failed once at the setup of an e2e test: the daemon could not bind the control port the test
had chosen a few seconds earlier with ``bind(0)``::

    cannot listen on 127.0.0.1:40423 for the control API (error while attempting to bind on
    address ('127.0.0.1', 40423): address already in use)

40423 lies in the kernel's ephemeral range (32768–60999), the pool it also draws outgoing
connections' local ports from; between the choice and the daemon's bind an ``opencode serve``
started and many client sockets opened. ``free_port()`` now chooses below that range, where only an
explicit bind takes a port."""

from __future__ import annotations

import socket

from roundtabled.offline.opencode_server import ephemeral_port_range, free_port


def test_free_port_is_below_the_kernel_s_ephemeral_range_and_bindable() -> None:
    low, high = ephemeral_port_range()
    assert low <= 40423 <= high or low > 40423  # the port that failed was one the kernel picks
    ports = [free_port() for _ in range(300)]
    assert all(p < low for p in ports), [p for p in ports if p >= low][:5]
    assert len(set(ports)) > 250  # chosen at random, so two test processes rarely meet
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))
