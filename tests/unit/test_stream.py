"""roundtabled.opencode.stream: SSE decoding, backoff, and EventStream against a fault-injecting
fake."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roundtabled.opencode import events as E
from roundtabled.opencode.events import Event
from roundtabled.opencode.stream import Backoff, EventStream, SSEDecoder, SSEEventTooLarge
from tests.fakes.sse_server import (
    CONNECTED,
    HEARTBEAT,
    Close,
    Cut,
    Drip,
    FakeSSEServer,
    Hang,
    Respond,
    Send,
    Sleep,
    Step,
    envelope,
)

# --- SSEDecoder --------------------------------------------------------------------------------


def test_decoder_server_framing() -> None:
    d = SSEDecoder()
    assert d.feed(b'data: {"a":1}\n\ndata: {"b":2}\n\ndata: {"c"') == [b'{"a":1}', b'{"b":2}']
    assert d.feed(b":3}\n") == []
    assert d.feed(b"\n") == [b'{"c":3}']
    assert d.pending_bytes == 0


def test_decoder_spec_rules() -> None:
    d = SSEDecoder()
    stream = (
        b"\xef\xbb\xbf: a comment\n\n"  # BOM + comment only: nothing dispatched
        b"data:no-space\n\n"
        b"data: line1\ndata: line2\n\n"  # multi-line data joined with \n
        b"event: custom\nid: 7\nretry: 100\ndata:  two-spaces\n\n"  # only one space removed
        b"event: only\n\n"  # no data: not dispatched
        b"data\n\n"  # field without colon: empty data, dispatched
        b"\n\n\n"  # stray blank lines
        b"data: crlf\r\n\r\n"
        b"data: cr\r\r"
        b"data: tail-without-terminator"
    )
    assert d.feed(stream) == [
        b"no-space",
        b"line1\nline2",
        b" two-spaces",
        b"",
        b"crlf",
        b"cr",
    ]
    d.reset()  # end of stream: the unterminated event is discarded
    assert d.feed(b"data: x\n\n") == [b"x"]


def test_decoder_cr_split_across_chunks() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\r") == []
    assert d.feed(b"\n\r") == []
    assert d.feed(b"\n") == [b"a"]


def test_decoder_limit() -> None:
    d = SSEDecoder(max_event_bytes=100)
    d.feed(b"data: " + b"x" * 50)
    with pytest.raises(SSEEventTooLarge) as info:
        d.feed(b"x\n\ndata: " + b"x" * 100)
    assert info.value.payloads == [b"x" * 51]  # completed before the oversized one
    assert d.pending_bytes == 0


frames = st.lists(
    st.builds(
        lambda body, crlf: b"data: " + body + (b"\r\n\r\n" if crlf else b"\n\n"),
        st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b"")),
        st.booleans(),
    ),
    max_size=8,
)


@given(frames, st.lists(st.integers(min_value=1, max_value=17), min_size=1, max_size=40))
def test_decoder_any_chunking_gives_same_payloads(fs: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(fs)
    expected = SSEDecoder().feed(stream)
    d = SSEDecoder()
    got: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        got += d.feed(stream[pos : pos + step])
        pos += step
        i += 1
    assert got == expected
    assert len(got) == len(fs)


# --- Backoff -----------------------------------------------------------------------------------


def test_backoff_grows_is_capped_and_resets() -> None:
    b = Backoff(0.5, 2.0, 30.0, rng=random.Random(1))
    ceilings, delays = [], []
    for _ in range(2000):
        ceilings.append(b.ceiling())
        delays.append(b.next_delay())
    assert ceilings[:8] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert delays[0] == 0.5
    assert all(0.5 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert max(delays) <= 30.0 and max(delays[6:]) > 16.0  # jittered up to the cap
    assert len({round(d, 6) for d in delays[6:20]}) > 10  # really jittered
    b.reset()
    assert b.next_delay() == 0.5


def test_backoff_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        Backoff(0.0)
    with pytest.raises(ValueError):
        Backoff(1.0, 2.0, 0.5)


# --- EventStream against the fake server ---------------------------------------------------------


@pytest.fixture
async def fake() -> AsyncIterator[FakeSSEServer]:
    server = FakeSSEServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.connects: list[float] = []
        self.reasons: list[str] = []

    def on_event(self, ev: Event) -> None:
        self.events.append(ev)

    async def on_connect(self) -> None:
        self.connects.append(time.monotonic())

    def on_disconnect(self, reason: str) -> None:
        self.reasons.append(reason)

    def types(self) -> list[str]:
        return [e.type for e in self.events if e.type != E.SERVER_HEARTBEAT]


async def until(cond: Callable[[], bool], within: float = 3.0) -> None:
    """Poll ``cond`` (callbacks give no awaitable to wait on) for at most ``within`` seconds."""
    async with asyncio.timeout(within):
        while not cond():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


class Running:
    """Start an EventStream in a task; cancel it on exit."""

    def __init__(self, url: str, rec: Recorder, **kw: Any) -> None:
        kw.setdefault("backoff_initial", 0.02)
        kw.setdefault("backoff_max", 0.1)
        kw.setdefault("heartbeat_timeout", 2.0)
        self.stream = EventStream(
            url,
            rec.on_event,
            on_connect=rec.on_connect,
            on_disconnect=rec.on_disconnect,
            rng=random.Random(7),
            **kw,
        )
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> EventStream:
        self.task = asyncio.create_task(self.stream.run())
        return self.stream

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task
        assert not self.stream.connected


async def test_scripted_frames_unknown_types_and_malformed_lines(fake: FakeSSEServer) -> None:
    fake.script(
        Send(CONNECTED),
        Send(envelope(E.SESSION_STATUS, {"sessionID": "ses_1", "status": {"type": "busy"}})),
        Send(b"data: {not json\n\n"),
        Send(b"data: [1,2]\n\n"),
        Send(envelope("brand.new.type", {"sessionID": "ses_1", "whatever": [1]})),
        Send(HEARTBEAT + b": keep-alive comment\n\n"),
        Send(envelope(E.SESSION_IDLE, {"sessionID": "ses_1"})),
        Hang(),
    )
    rec = Recorder()
    async with Running(fake.url, rec) as stream:
        await until(lambda: len(rec.events) == 5)
        assert rec.types() == [
            E.SERVER_CONNECTED,
            E.SESSION_STATUS,
            "brand.new.type",
            E.SESSION_IDLE,
        ]
        assert rec.events[1].status_type == "busy" and rec.events[1].directory == "/proj"
        assert rec.events[2].session_id == "ses_1"
        assert stream.malformed == 2 and stream.events == 5 and stream.connected
        assert stream.bytes > 0 and stream.last_event_at is not None
        await until(lambda: len(rec.connects) == 1)
        assert rec.reasons == [] and stream.reconnects == 0
    assert fake.requests[0].path == "/global/event"
    assert fake.requests[0].authorization is None


async def test_reconnect_after_close_and_cut_runs_on_connect_again(fake: FakeSSEServer) -> None:
    fake.script(Send(CONNECTED + envelope(E.SESSION_IDLE, {"sessionID": "a"})), Close())
    # cut in the middle of a frame: the partial event must not be delivered
    fake.script(Send(CONNECTED + b'data: {"payload":{"type":"session.idle"'), Cut())
    fake.script(Send(CONNECTED + envelope(E.SESSION_IDLE, {"sessionID": "c"})), Hang())
    rec = Recorder()
    async with Running(fake.url, rec) as stream:
        await until(lambda: len(rec.connects) == 3)
        await until(lambda: stream.events == 5)
        assert [e.session_id for e in rec.events if e.type == E.SESSION_IDLE] == ["a", "c"]
        assert rec.reasons[0] == "server closed the stream"
        assert rec.reasons[1].startswith("connection lost")
        assert stream.reconnects == 2 and stream.connects == 3 and stream.connected
        # the reason is history once events flow again (health reports read last_error)
        assert stream.last_error is None


async def test_half_open_detected_after_heartbeat_timeout(fake: FakeSSEServer) -> None:
    fake.script(Send(CONNECTED), Hang())  # connected, then silence with the socket open
    fake.script(Hang())  # headers, then nothing at all
    fake.script(Send(CONNECTED), Hang())
    rec = Recorder()
    t0 = time.monotonic()
    async with Running(fake.url, rec, heartbeat_timeout=0.3) as stream:
        await until(lambda: len(rec.reasons) >= 1)
        first = time.monotonic() - t0
        await until(lambda: len(rec.connects) == 2)
        assert rec.reasons[:2] == ["no heartbeat for 0.3 s"] * 2
        assert 0.25 <= first < 1.5
        assert stream.connected


async def test_heartbeats_keep_a_quiet_stream_alive(fake: FakeSSEServer) -> None:
    beats: list[Step] = [Sleep(0.1), Send(HEARTBEAT)] * 8
    fake.script(Send(CONNECTED), *beats, Hang())
    rec = Recorder()
    async with Running(fake.url, rec, heartbeat_timeout=0.3):
        await until(lambda: len(rec.events) == 9)
        assert rec.reasons == []


def big_part(size: int) -> tuple[str, bytes]:
    text = ("0123456789abcdef" * (size // 16 + 1))[:size]
    return text, envelope(
        E.MESSAGE_PART_UPDATED,
        {"sessionID": "ses_big", "part": {"id": "prt_1", "type": "tool", "text": text}},
    )


async def test_slow_8mb_event_is_not_declared_dead(fake: FakeSSEServer) -> None:
    text, raw = big_part(8 * 1024 * 1024)
    fake.script(Send(CONNECTED), Drip(raw, chunk=64 * 1024, seconds=2.0), Send(HEARTBEAT), Hang())
    rec = Recorder()
    async with Running(fake.url, rec, heartbeat_timeout=0.5) as stream:
        await until(lambda: len(rec.events) == 3, within=8.0)
        assert rec.reasons == []
        big = rec.events[1]
        assert big.session_id == "ses_big" and big.part_type == "tool"
        assert big.properties["part"]["text"] == text
        assert stream.bytes > 8 * 1024 * 1024


async def test_16mb_event_intact(fake: FakeSSEServer) -> None:
    text, raw = big_part(16 * 1024 * 1024)
    fake.script(Send(CONNECTED), Send(raw), Send(envelope(E.SESSION_IDLE, {"sessionID": "x"})))
    rec = Recorder()
    async with Running(fake.url, rec):
        await until(lambda: len(rec.events) == 3, within=8.0)
        assert rec.events[1].properties["part"]["text"] == text
        assert rec.events[2].type == E.SESSION_IDLE


async def test_event_over_the_limit_drops_the_connection(fake: FakeSSEServer) -> None:
    _, raw = big_part(200_000)
    fake.script(Send(CONNECTED), Send(raw))
    fake.script(Send(CONNECTED), Hang())
    rec = Recorder()
    async with Running(fake.url, rec, max_event_bytes=100_000):
        await until(lambda: len(rec.connects) == 2)
        assert rec.reasons[0].startswith("event larger than 100000 bytes")
        assert rec.events[0].type == E.SERVER_CONNECTED  # dispatched before the overflow


async def test_401_names_the_password_and_backs_off(
    fake: FakeSSEServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake.default = [Respond(401, {"www-authenticate": 'Basic realm="Secure Area"'})]
    rec = Recorder()
    caplog.set_level(logging.DEBUG, logger="roundtabled.stream")
    async with Running(
        fake.url, rec, password="s3cret-pw", backoff_initial=0.05, backoff_max=0.2
    ) as stream:
        await fake.wait_requests(6)
        assert not stream.connected and rec.connects == []
    reason = rec.reasons[0]
    assert "401" in reason and "OPENCODE_SERVER_PASSWORD" in reason
    assert stream.last_error == reason
    assert fake.requests[0].authorization is not None
    assert fake.requests[0].authorization.startswith("Basic ")
    gaps = [b.at - a.at for a, b in zip(fake.requests, fake.requests[1:], strict=False)]
    assert all(g >= 0.045 for g in gaps)  # never closer than backoff_initial
    # seeded jitter draws 0.05, 0.066, 0.073, 0.148, 0.061: the first is exactly the initial
    # delay, later ones come from a window that grew to the 0.2 s cap and no further
    assert gaps[0] < 0.09 and max(gaps[:5]) > 0.12 and max(gaps) < 0.35
    assert stream.backoff.ceiling() == 0.2
    assert "s3cret-pw" not in caplog.text and all("s3cret-pw" not in r for r in rec.reasons)
    # repeated identical failures are logged once at WARNING, then at DEBUG
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1


async def test_401_without_password_and_credentials_in_url(fake: FakeSSEServer) -> None:
    fake.default = [Respond(401)]
    rec = Recorder()
    async with Running(fake.url, rec):
        await until(lambda: len(rec.reasons) >= 1)
    assert "OPENCODE_SERVER_PASSWORD" in rec.reasons[0] and "none configured" in rec.reasons[0]
    url_with_creds = fake.url.replace("http://", "http://opencode:pw9@")
    rec2 = Recorder()
    async with Running(url_with_creds, rec2) as stream:
        await until(lambda: len(rec2.reasons) >= 1)
        assert "pw9" not in stream.url
    assert rec2.reasons[0] == "401 unauthorized: OPENCODE_SERVER_PASSWORD rejected"
    assert fake.requests[-1].authorization is not None


async def test_instance_disposed_is_an_info_reason(
    fake: FakeSSEServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake.script(
        Send(CONNECTED),
        Send(envelope(E.SERVER_INSTANCE_DISPOSED, {"directory": "/proj"})),
        Close(),
    )
    fake.script(Send(CONNECTED), Hang())
    rec = Recorder()
    caplog.set_level(logging.INFO, logger="roundtabled.stream")
    async with Running(fake.url, rec):
        await until(lambda: len(rec.connects) == 2)
    assert rec.reasons[0] == "instance disposed"
    rec_log = [r for r in caplog.records if "instance disposed" in r.getMessage()]
    assert rec_log and all(r.levelno == logging.INFO for r in rec_log)


async def test_connection_refused_and_other_statuses(fake: FakeSSEServer) -> None:
    rec = Recorder()
    async with Running("http://127.0.0.1:9", rec):  # discard port: nothing listens
        await until(lambda: len(rec.reasons) >= 2)
    assert rec.reasons[0] == "connection refused"
    fake.script(Respond(503))
    rec2 = Recorder()
    async with Running(fake.url, rec2):
        await until(lambda: len(rec2.reasons) >= 1)
    assert rec2.reasons[0].startswith("HTTP 503")


async def test_backoff_resets_after_a_stable_connection(fake: FakeSSEServer) -> None:
    fake.default = [Respond(500)]
    for _ in range(2):
        fake.script(Respond(500))
    fake.script(Send(CONNECTED), Sleep(0.3), Close())
    rec = Recorder()
    async with Running(fake.url, rec, stable_after=0.2, backoff_max=5.0) as stream:
        await until(lambda: len(rec.reasons) == 3)
        # two failures grew the window; the 0.3 s connection (> stable_after) reset it
        assert stream.backoff.attempt == 1


async def test_on_connect_and_on_event_errors_do_not_kill_the_stream(
    fake: FakeSSEServer,
) -> None:
    fake.script(Send(CONNECTED + envelope(E.SESSION_IDLE, {"sessionID": "a"})), Close())
    fake.script(Send(CONNECTED + envelope(E.SESSION_IDLE, {"sessionID": "b"})), Hang())
    seen: list[str | None] = []
    connects = 0

    def on_event(ev: Event) -> None:
        seen.append(ev.session_id)
        raise RuntimeError("callback bug")

    async def on_connect() -> None:
        nonlocal connects
        connects += 1
        raise RuntimeError("resync bug")

    stream = EventStream(fake.url, on_event, on_connect=on_connect, backoff_initial=0.02)
    task = asyncio.create_task(stream.run())
    try:
        await until(lambda: connects == 2 and "b" in seen)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_slow_on_connect_is_coalesced_not_overlapped(fake: FakeSSEServer) -> None:
    fake.script(Send(CONNECTED), Close())
    fake.script(Send(CONNECTED), Close())
    fake.script(Send(CONNECTED), Hang())
    running = 0
    peak = 0
    calls = 0

    async def on_connect() -> None:
        nonlocal running, peak, calls
        running += 1
        calls += 1
        peak = max(peak, running)
        await asyncio.sleep(0.3)
        running -= 1

    stream = EventStream(fake.url, lambda ev: None, on_connect=on_connect, backoff_initial=0.01)
    task = asyncio.create_task(stream.run())
    try:
        await until(lambda: stream.connects == 3)
        await until(lambda: calls == 2 and running == 0, within=2.0)
        assert peak == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_feed_bytes_is_the_benchmark_hook() -> None:
    got: list[Event] = []
    stream = EventStream("http://127.0.0.1:1", got.append)
    body = CONNECTED + envelope(E.SESSION_IDLE, {"sessionID": "s"}) * 1000 + b"data: bad\n\n"
    n = sum(stream.feed_bytes(body[i : i + 4096]) for i in range(0, len(body), 4096))
    assert n == 1001 == stream.events and stream.malformed == 1 and stream.bytes == len(body)
    assert got[0].type == E.SERVER_CONNECTED and stream.connected


def test_feed_bytes_parses_every_event_of_a_large_replay() -> None:
    """The benchmark hook decodes every frame of a long replay (throughput is measured in
    bench/, figure 4 — never in a timed unit test)."""
    stream = EventStream("http://127.0.0.1:1", lambda ev: None)
    delta = envelope(
        E.MESSAGE_PART_DELTA,
        {"sessionID": "s", "messageID": "m", "partID": "p", "field": "text", "delta": "w "},
    )
    body = CONNECTED + delta * 20_000
    for i in range(0, len(body), 65536):
        stream.feed_bytes(body[i : i + 65536])
    assert stream.events == 20_001
