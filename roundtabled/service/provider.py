"""The OpenCode configuration of a local OpenAI-compatible model server (llama.cpp's server,
Ollama, LM Studio, vLLM): what ``roundtabled eval --base-url URL --model NAME`` and ``scripts/demo
--base-url URL --model NAME`` write so that the seats run on it (README, "Local models").

OpenCode reaches such a server through an ``@ai-sdk/openai-compatible`` provider whose
``baseURL`` ends in ``/v1``; its models need ``limit.context`` and ``limit.output`` (the server's
context must hold the prompt plus the ``max_tokens`` OpenCode asks for, which is ``limit.output``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import aiohttp

PROVIDER_ID = "local"
"""The provider id the written configuration uses: the seats' model is ``local/NAME``."""

SEAT_PROMPT = (
    "You are a panellist who always shows full working. Before any answer, reason through the "
    "problem step by step in detail, then give your final answer as the message asks."
)
"""The prompt of the seats written for a local model: short, since a small local model reads it
on every turn, and asking for the working first, since a small model told to be concise answers
the roundtable's turn prompt with its closing line alone (the forms compared in bench/README.md,
"eval")."""


class BadModelOption(ValueError):
    """A base URL or model name that cannot be used (the message names the option)."""


PROBE_TIMEOUT_S = 5.0
"""How long :func:`probe` waits for the model server's answer (seconds)."""


async def probe(base_url: str, model: str, flag: str = "--base-url") -> str | None:
    """Ask the server at ``base_url`` (checked, ending in ``/v1``) for its models
    (``GET /models``, the OpenAI-compatible listing) before anything starts, so a mistyped URL
    or a server not started is one line at once, not every turn timing out later.

    Returns:
        A note when the server answers but does not list ``model`` (some servers, llama.cpp's,
        answer any model name, so this is said, not refused); ``None`` otherwise.

    Raises:
        BadModelOption: nothing answers at ``base_url`` (refused, timed out after
            :data:`PROBE_TIMEOUT_S`, not HTTP), naming ``flag`` and the cause.
    """
    url = base_url.rstrip("/") + "/models"
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)) as http,
            http.get(url) as resp,
        ):
            body = await resp.json(content_type=None) if resp.status == 200 else None
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        cause = str(exc) or type(exc).__name__
        raise BadModelOption(
            f"{flag} {base_url}: no OpenAI-compatible server answers there ({cause}); start "
            "it first (e.g. llama-server … --port N) or fix the URL"
        ) from None
    listed = body.get("data") if isinstance(body, dict) else None
    if not isinstance(listed, list):
        return None
    ids = [str(m.get("id")) for m in listed if isinstance(m, dict) and m.get("id")]
    if ids and model not in ids:
        return (
            f"the server at {base_url} lists {', '.join(ids[:5])} but not {model!r}; "
            "going on (some servers answer any model name)"
        )
    return None


def check_base_url(value: str, flag: str = "--base-url") -> str:
    """``value`` as a provider ``baseURL``: ``http(s)://host[:port][/path]``, ``/v1`` appended when
    the path is empty (what OpenAI-compatible servers serve).

    Raises:
        BadModelOption: naming ``flag`` and the expected form.
    """
    problem = f"{flag} = {value!r}; expected http://host:port/v1 (an OpenAI-compatible server)"
    try:
        url = urlsplit(value.strip())
        url.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise BadModelOption(problem) from None
    if url.scheme not in ("http", "https") or not url.hostname or url.query or url.fragment:
        raise BadModelOption(problem)
    base = value.strip().rstrip("/")
    return base if url.path.strip("/") else base + "/v1"


def check_model_name(value: str, flag: str = "--model") -> str:
    """``value`` as the served model's name (e.g. ``local``, ``qwen2.5:0.5b``).

    Raises:
        BadModelOption: empty, containing whitespace or a slash-prefixed provider.
    """
    name = value.strip()
    if not name or any(c.isspace() for c in name) or len(name) > 200:
        raise BadModelOption(
            f"{flag} = {value!r}; expected the model name the server serves (no spaces)"
        )
    return name


DEFAULT_CONTEXT = 16384
"""``limit.context`` of a written model (tokens) unless told otherwise."""
DEFAULT_OUTPUT = 2048
"""``limit.output`` of a written model (tokens) unless told otherwise."""
OUTPUT_LIMITS = (64, 65536)
"""``--output-limit``'s allowed range (tokens), ``roundtabled eval`` and the demo."""
CONTEXT_LIMITS = (1024, 2**21)
"""``--context-limit``'s allowed range (tokens), ``roundtabled eval`` and the demo."""


def check_limits(output: str | None, context: str | None) -> tuple[int, int]:
    """``--output-limit`` and ``--context-limit`` as given (``None``: the default), checked by
    ``roundtabled eval``'s rule: whole numbers in :data:`OUTPUT_LIMITS` and
    :data:`CONTEXT_LIMITS`, the output below the context (the context holds the prompt and the
    reply).

    Returns:
        ``(output, context)`` in tokens.

    Raises:
        BadModelOption: naming the flag, its allowed range and the value given.
    """
    out = whole(output, "--output-limit", *OUTPUT_LIMITS) or DEFAULT_OUTPUT
    ctx = whole(context, "--context-limit", *CONTEXT_LIMITS) or DEFAULT_CONTEXT
    if out >= ctx:
        raise BadModelOption(
            f"--output-limit ({out}) must be below --context-limit ({ctx}): the context "
            "holds the prompt and the reply"
        )
    return out, ctx


def whole(value: str | None, flag: str, low: int, high: int) -> int | None:
    """A flag's whole number in ``low``..``high`` (``None`` when not given).

    Raises:
        BadModelOption: ``"{flag} must be a whole number {low}-{high}, got …"`` or
            ``"{flag} must be {low}-{high}, got N"``.
    """
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        raise BadModelOption(f"{flag} must be a whole number {low}-{high}, got {value!r}") from None
    if not low <= n <= high:
        raise BadModelOption(f"{flag} must be {low}-{high}, got {n}")
    return n


def provider_config(
    base_url: str, model: str, *, context: int = DEFAULT_CONTEXT, output: int = DEFAULT_OUTPUT
) -> dict[str, Any]:
    """The ``provider`` block of ``opencode.json`` for one model of a local server (``context``
    and ``output`` in tokens; ``output`` is what OpenCode asks the server for per reply)."""
    return {
        PROVIDER_ID: {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Local OpenAI-compatible server",
            "options": {"baseURL": base_url, "apiKey": "unused"},
            "models": {model: {"name": model, "limit": {"context": context, "output": output}}},
        }
    }


def with_local_model(
    config: dict[str, Any],
    base_url: str,
    model: str,
    seats: list[str],
    *,
    context: int = DEFAULT_CONTEXT,
    output: int = DEFAULT_OUTPUT,
) -> dict[str, Any]:
    """``config`` (an ``opencode.json`` dict) with the local provider added, it as the default
    model (the built-in observer's and the title's), and each of ``seats`` on it: an agent the
    config already defines keeps its prompt and settings but gets the model; a new one is a
    subagent with :data:`SEAT_PROMPT` and no tools (every permission denied)."""
    label = f"{PROVIDER_ID}/{model}"
    agents = dict(config.get("agent") or {})
    for name in seats:
        existing = agents.get(name)
        if isinstance(existing, dict):
            agents[name] = {**existing, "model": label}
        else:
            agents[name] = {
                "mode": "subagent",
                "description": f"Roundtable seat {name} on {label}",
                "prompt": SEAT_PROMPT,
                "model": label,
                "permission": {"*": "deny"},
            }
    agents.setdefault("title", {"disable": True})
    return {
        **config,
        "provider": {
            **(config.get("provider") or {}),
            **provider_config(base_url, model, context=context, output=output),
        },
        "model": label,
        "small_model": label,
        "agent": agents,
    }
