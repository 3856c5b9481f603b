"""Security: fuzzed control API bodies and tool arguments never crash the daemon.

Hypothesis generates arbitrary JSON (and non-JSON) bodies, query values and session ids for every
route of :class:`~roundtabled.service.control.ControlAPI`, served by aiohttp in-process in front of
a stub engine that validates like the real one (``parse_request`` then ``check_agents`` against a
fixed agent list). Every refused request gets a 4xx JSON body ``{"error": "Error: …", "field": …}``
naming the field; nothing is a 500, a hang (each request has a 10 s bound) or an exception out of
the app. ``validation.parse_request`` and ``validation.check_agents`` are fuzzed directly too.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roundtabled.core.server_records import AgentRecord
from roundtabled.core.validation import ALLOWED_KEYS, check_agents, parse_request
from roundtabled.errors import ValidationFailed
from roundtabled.service.control import ControlAPI

TOKEN = "fuzz-token-0123456789"
AVAILABLE: list[dict[str, Any]] = [
    {"name": n, "mode": "subagent"} for n in ("pm", "dev", "rv", "build")
] + [{"name": "roundtable-observer", "mode": "subagent", "hidden": True}]
RECORDS = [
    AgentRecord(str(a["name"]), "subagent", bool(a.get("hidden")), None, None, False)
    for a in AVAILABLE
]
"""The same agents as the server port reads them (what ``check_agents`` checks against)."""
KNOWN = "ses_fuzzKNOWN123"


class _StubPort:
    """The 1.x port as ``GET /v1/agents`` reads it."""

    async def agents(self, directory: str | None) -> list[AgentRecord]:
        return RECORDS


class _StubShell:
    port = _StubPort()


class _StubState:
    session_id = KNOWN
    title = "t"
    total_rounds = 1

    class phase:
        value = "active"


class StubEngine:
    """What ControlAPI needs from the engine; validates like the real engine, runs nothing."""

    def __init__(self) -> None:
        self.shell = _StubShell()
        self.server_url = "http://127.0.0.1:1"
        self.ready = asyncio.Event()
        self.ready.set()
        self.last_error: str | None = None
        self.tables: dict[str, Any] = {}

    def starting(self) -> str | None:
        return None  # recovered: every answer is the real one

    async def start(self, req: Any) -> Any:
        if req.agents is not None:
            check_agents(req.agents, req.observer, RECORDS)
        return _StubState()

    def status(self, s2: str, *, result: bool = False) -> dict[str, Any] | None:
        return {"phase": "active"} if s2 == KNOWN else None

    async def stored_status(self, s2: str, *, result: bool = False) -> dict[str, Any] | None:
        return None

    async def wait_result(self, s2: str, timeout: float) -> dict[str, Any] | None:
        if s2 != KNOWN:
            raise ValidationFailed("sessionID", f"no roundtable {s2!r}")
        return None

    def take_result(self, s2: str, *, tool_call_id: str | None) -> dict[str, Any] | None:
        return None

    async def cancel(self, s2: str, *, summarize: bool, reason: str) -> Any:
        if s2 != KNOWN:
            raise ValidationFailed("sessionID", f"no roundtable {s2!r}")
        return _StubState()

    def subscribe(self, s2: str) -> asyncio.Queue[dict[str, Any]]:
        raise ValidationFailed("sessionID", f"no roundtable {s2!r}")

    def unsubscribe(self, s2: str, q: Any) -> None:
        return None


class Harness:
    """One aiohttp test client on a private loop, shared by all examples (fast)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        api = ControlAPI(StubEngine(), TOKEN)  # type: ignore[arg-type]
        self.client: TestClient[Any, Any] = TestClient(TestServer(api.app), loop=self.loop)
        self.loop.run_until_complete(self.client.start_server())

    def request(
        self,
        method: str,
        path: str,
        *,
        data: bytes | None = None,
        params: dict[str, str] | None = None,
        token: str | None = TOKEN,
    ) -> tuple[int, Any]:
        async def go() -> tuple[int, Any]:
            headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
            if data is not None:
                headers["Content-Type"] = "application/json"
            resp = await self.client.request(
                method, path, data=data, params=params, headers=headers
            )
            raw = await resp.read()
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
            return resp.status, body

        return self.loop.run_until_complete(asyncio.wait_for(go(), 10))

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()


@pytest.fixture(scope="module")
def api() -> Iterator[Harness]:
    h = Harness()
    try:
        yield h
    finally:
        h.close()


def assert_clear_error(status: int, body: Any, *, allowed: tuple[int, ...] = (200,)) -> None:
    """A success in ``allowed`` or a 4xx JSON error that starts with ``Error:`` and names a
    field."""
    assert status != 500 and status < 500, (status, body)
    if status in allowed:
        return
    assert 400 <= status < 500, (status, body)
    assert isinstance(body, dict), (status, body)
    assert str(body.get("error", "")).startswith("Error:"), body
    assert isinstance(body.get("field"), str) and body["field"], body


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)
good_agents = st.lists(st.sampled_from(["pm", "dev", "rv", "build", " pm", "PM", "x"]), max_size=5)
field_values: dict[str, st.SearchStrategy[Any]] = {
    "agents": good_agents | json_values,
    "prompt": st.text(max_size=50) | json_values,
    "rounds": st.integers(-3, 60) | json_values,
    "observer": st.sampled_from(["rv", "ghost", "roundtable-observer"]) | json_values,
    "sessionID": st.sampled_from(["ses_abcdef123", "ses_", "nope"]) | json_values,
    "parentSessionID": st.sampled_from(["ses_abcdef123", "x"]) | json_values,
    "directory": st.sampled_from(["/tmp", "relative"]) | json_values,
    "turnTimeout": st.floats(0, 100000) | json_values,
    "permissionPolicy": st.sampled_from(["reject", "allow-once", "ask", "maybe"]) | json_values,
    "extendMode": st.sampled_from(["continuation", "new-topic", "x"]) | json_values,
    "title": st.text(max_size=300) | json_values,
    "toolCallID": json_values,
    "toolMessageID": json_values,
}
request_bodies = (
    st.fixed_dictionaries(
        {}, optional={k: field_values.get(k, json_values) for k in sorted(ALLOWED_KEYS)}
    )
    | st.dictionaries(st.text(max_size=12), json_values, max_size=4)
    | json_values
)

FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FUZZ
@given(body=request_bodies)
def test_create_with_any_json_body_is_200_or_clear_field_error(api: Harness, body: Any) -> None:
    """POST /v1/roundtables: any JSON → 200 or 400 ``Error:`` + field, never a 500."""
    status, data = api.request("POST", "/v1/roundtables", data=json.dumps(body).encode())
    assert_clear_error(status, data)


@FUZZ
@given(raw=st.binary(max_size=200))
def test_create_with_arbitrary_bytes_is_clear_error(api: Harness, raw: bytes) -> None:
    """Non-JSON (or any) bytes as the body: a clear error naming ``body`` or a field."""
    status, data = api.request("POST", "/v1/roundtables", data=raw)
    assert_clear_error(status, data)


@FUZZ
@given(body=json_values, ses=st.sampled_from([KNOWN, "ses_unknown1", "x", "ses_" + "a" * 200]))
def test_cancel_with_any_body_is_clear_error(api: Harness, body: Any, ses: str) -> None:
    """POST /v1/roundtables/{ses}/cancel: any body and id → 200 or a field error."""
    status, data = api.request(
        "POST", f"/v1/roundtables/{ses}/cancel", data=json.dumps(body).encode()
    )
    assert_clear_error(status, data)


@FUZZ
@given(
    wait=st.text(max_size=12) | st.sampled_from(["nan", "inf", "-1", "61", "1e308", "0"]),
    fmt=st.text(max_size=6),
    ses=st.text(max_size=30).filter(lambda s: "/" not in s and "?" not in s and "#" not in s),
)
def test_query_values_and_session_ids_are_clear_errors(
    api: Harness, wait: str, fmt: str, ses: str
) -> None:
    """``wait``, ``format``, ``directory`` and session ids in paths: never a 500."""
    ses_path = ses or "x"
    for method, path, params in (
        ("GET", f"/v1/roundtables/{KNOWN}/result", {"wait": wait}),
        ("GET", f"/v1/roundtables/{ses_path}", None),
        ("GET", f"/v1/roundtables/{ses_path}/result", {"wait": "0"}),
        ("GET", f"/v1/roundtables/{ses_path}/export", {"format": fmt}),
        ("GET", f"/v1/roundtables/{ses_path}/events", None),
        ("GET", "/v1/agents", {"directory": fmt}),
    ):
        status, data = api.request(method, path, params=params)
        assert_clear_error(status, data, allowed=(200, 404) if "export" not in path else (200,))


def test_oversized_body_is_a_clear_error(api: Harness) -> None:
    """A body above the 1 MiB limit is refused with a JSON error naming ``body``."""
    big = json.dumps({"prompt": "x" * (2 << 20), "agents": ["pm", "dev"]}).encode()
    status, data = api.request("POST", "/v1/roundtables", data=big)
    assert status == 413
    assert_clear_error(status, data)
    assert data["field"] == "body"


@pytest.mark.parametrize("token", [None, "", "wrong", TOKEN + "x", TOKEN[:-1]])
def test_missing_or_wrong_token_is_401_everywhere(api: Harness, token: str | None) -> None:
    """Every route but /v1/ping answers 401 without the right bearer token."""
    for method, path in (
        ("GET", "/v1/health"),
        ("GET", "/v1/agents"),
        ("POST", "/v1/roundtables"),
        ("GET", "/v1/roundtables"),
        ("GET", f"/v1/roundtables/{KNOWN}"),
        ("GET", f"/v1/roundtables/{KNOWN}/result"),
        ("POST", f"/v1/roundtables/{KNOWN}/cancel"),
        ("GET", f"/v1/roundtables/{KNOWN}/events"),
        ("GET", f"/v1/roundtables/{KNOWN}/export"),
    ):
        status, data = api.request(method, path, token=token, data=b"{}")
        assert status == 401, (method, path, status)
        assert data["error"].startswith("Error:")
    assert api.request("GET", "/v1/ping", token=token)[0] == 200


# -- the validation layer, fuzzed directly ------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(body=request_bodies)
def test_parse_request_accepts_or_names_the_field(body: Any) -> None:
    """``parse_request``: a request or :class:`ValidationFailed` naming a field; nothing else."""
    try:
        req = parse_request(body)
    except ValidationFailed as exc:
        assert str(exc).startswith("Error:")
        assert exc.field and (
            exc.field in ALLOWED_KEYS or exc.field == "body" or exc.field in body
        ), exc.field
        return
    assert isinstance(req.prompt, str) and req.prompt.strip()
    assert 1 <= req.rounds <= 50


@settings(max_examples=300, deadline=None)
@given(
    agents=st.lists(st.text(max_size=8) | st.sampled_from(["pm", "dev", "rv", "PM"]), max_size=14),
    observer=st.none() | st.text(max_size=8) | st.sampled_from(["rv", "roundtable-observer"]),
)
def test_check_agents_accepts_or_names_the_field(agents: list[str], observer: str | None) -> None:
    """``check_agents``: accepted seats are 2–12 distinct known names, else a field error."""
    try:
        check_agents(agents, observer, RECORDS)
    except ValidationFailed as exc:
        assert exc.field in ("agents", "observer")
        assert str(exc).startswith("Error:") and "Available agents:" in str(exc)
        return
    assert 2 <= len(agents) <= 12
    assert len({a.casefold() for a in agents}) == len(agents)
    assert set(agents) <= {"pm", "dev", "rv", "build"}


def test_client_session_type_is_available() -> None:
    """Sanity: the harness uses aiohttp's own test client (no network beyond loopback)."""
    assert aiohttp.__version__
