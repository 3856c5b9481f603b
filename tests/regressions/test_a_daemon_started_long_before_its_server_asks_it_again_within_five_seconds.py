"""A daemon started before its OpenCode server (``roundtabled serve`` with nothing at
``server_url`` yet, as a systemd unit started first) asked again after 0.5, 1, 2, 4, 8, 16 s and
then every 30 s: a server that came up 32 s later was driven only ~30 s after that. Seen in CI
as ``test_a_daemon_waiting_for_its_server_drives_it_when_it_comes_up_as_opencode_2`` timing out
(60 s) on a loaded machine. Now a server that does not answer is asked at most 5 s apart (a
loopback ask costs nothing); only refused credentials, which nothing but the user's fix
changes, back off to 30 s."""

from __future__ import annotations

from roundtabled.core import failures


def waits(n: int, *, credentials_refused: bool = False) -> list[float]:
    out = [failures.SERVER_WAIT_FIRST_S]
    while len(out) < n:
        out.append(failures.next_server_wait(out[-1], credentials_refused=credentials_refused))
    return out


def test_a_server_that_does_not_answer_is_asked_at_most_five_seconds_apart() -> None:
    # the failing schedule reached 30 s at its 8th wait
    assert waits(12) == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]


def test_refused_credentials_still_back_off_to_thirty_seconds() -> None:
    assert waits(8, credentials_refused=True)[-3:] == [16.0, 30.0, 30.0]
