"""``roundtabled start --turn-timeout nan`` (or ``inf``) started the roundtable on the daemon's
default turn timeout: JSON has no NaN or infinity, orjson sent null, and the daemon read null as
"not given" — a flag silently dropped. The CLI now checks the flag by the daemon's own rule
before any call and refuses it naming ``--turn-timeout`` and the allowed range, exit code 2 (the
same line the daemon gives for ``--turn-timeout 0.5``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest


@pytest.mark.parametrize(("value", "shown"), [("nan", "nan"), ("inf", "inf"), ("0.5", "0.5")])
def test_a_non_finite_turn_timeout_is_refused_not_dropped(
    value: str, shown: str, cli_without_daemon: Callable[..., tuple[int, str]]
) -> None:
    # No daemon is needed: the refusal comes before any call (an unused port proves it).
    code, err = cli_without_daemon("start", "--agents", "pm,dev", "--turn-timeout", value, "t")
    assert code == 2, err
    assert err == f"Error: --turn-timeout must be a number of seconds from 1 to 86400, got {shown}"
