"""The fake has every public method of :class:`OpenCodeClient`, with the same parameters, so the
engine can use either (a route added to the client must be added to the fake and pinned)."""

from __future__ import annotations

import inspect

import pytest

from roundtabled.opencode.client import OpenCodeClient
from tests.fakes.fake_opencode import FakeOpenCode

ROUTES = sorted(
    name
    for name, fn in inspect.getmembers(OpenCodeClient, inspect.iscoroutinefunction)
    if not name.startswith("_")
)


def test_the_client_has_routes() -> None:
    assert {"prompt_async", "messages", "update_part", "abort", "statuses"} <= set(ROUTES)


@pytest.mark.parametrize("name", ROUTES)
def test_the_fake_has_the_client_method_with_the_same_parameters(name: str) -> None:
    real = inspect.signature(getattr(OpenCodeClient, name))
    fake_fn = getattr(FakeOpenCode, name, None)
    assert fake_fn is not None, f"FakeOpenCode lacks {name}"
    assert inspect.iscoroutinefunction(fake_fn), name
    fake = inspect.signature(fake_fn)
    shape = [(p.name, p.kind, p.default) for p in real.parameters.values()]
    assert [(p.name, p.kind, p.default) for p in fake.parameters.values()] == shape
