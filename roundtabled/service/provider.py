"""The OpenCode configuration of a local OpenAI-compatible model server (llama.cpp's server,
Ollama, LM Studio, vLLM): what ``roundtabled eval --base-url URL --model NAME`` and ``scripts/demo
--base-url URL --model NAME`` write so that the seats run on it (README, "Local models"). The eval
also writes a mixed panel: several models, at one URL or one URL each, dealt to the seats in turn
(docs/eval.md, "Running it").

OpenCode reaches such a server through an ``@ai-sdk/openai-compatible`` provider whose
``baseURL`` ends in ``/v1``; its models need ``limit.context`` and ``limit.output`` (the server's
context must hold the prompt plus the ``max_tokens`` OpenCode asks for, which is ``limit.output``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from roundtabled.service import config

PROVIDER_ID = "local"
"""The provider id the written configuration uses: the seats' model is ``local/NAME``. A mixed
panel's second URL is ``local-2``, its third ``local-3`` (:func:`local_models`)."""
PROVIDER_NAME = "Local OpenAI-compatible server"
"""The provider's display name (a second URL's: ``… 2``)."""

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


def is_loopback_url(url: str) -> bool:
    """True when ``url``'s host is this machine (``localhost``, ``127.0.0.1``, ``[::1]``): a
    server there reaches the model servers as a process here does."""
    return config.is_loopback_host(urlsplit(url).hostname or "")


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


@dataclass(frozen=True)
class LocalModel:
    """One model of a local server as the written configuration names it: ``provider`` (the
    provider id of its URL, :data:`PROVIDER_ID` for the first URL), ``base_url`` (checked, ending
    in ``/v1``) and ``name`` (the name the server serves it under)."""

    provider: str
    base_url: str
    name: str

    @property
    def label(self) -> str:
        """OpenCode's ``provider/model``, e.g. ``local/qwen``."""
        return f"{self.provider}/{self.name}"


def split_list(value: str, flag: str, what: str) -> list[str]:
    """``value`` as a comma-separated list of 1 or more items, each stripped.

    Raises:
        BadModelOption: an empty item (``a,,b``, a trailing comma), naming ``flag`` and ``what``
            (the items' kind, e.g. ``model names``).
    """
    items = [v.strip() for v in value.split(",")]
    if not all(items):
        raise BadModelOption(
            f"{flag} = {value!r} has an empty item; expected one or more comma-separated {what}"
        )
    return items


def check_local_models(
    base_url: str, model: str, *, url_flag: str = "--base-url", model_flag: str = "--model"
) -> tuple[list[str], list[str]]:
    """``--base-url`` and ``--model`` as given: ``model`` one or more comma-separated names,
    ``base_url`` either one URL (every model is served there) or exactly as many comma-separated
    URLs as models (model i at URL i). ``url_flag``/``model_flag``: what the error names (the flag,
    or the environment variable the value came from).

    Returns:
        ``(base_urls, models)``: the URLs as :func:`check_base_url` writes them (1 or
        ``len(models)`` of them) and the checked names, in the order given.

    Raises:
        BadModelOption: an empty item, a URL that is not ``http(s)://host[:port][/path]``, a bad
            model name, or another number of URLs than 1 or the models', naming the flag.
    """
    names = [check_model_name(m, model_flag) for m in split_list(model, model_flag, "model names")]
    urls = split_list(base_url, url_flag, "URLs (one, or one per model)")
    if len(urls) not in (1, len(names)):
        allowed = (
            f"one URL (every model served there) or {len(names)} (model i at URL i)"
            if len(names) > 1
            else "one URL"
        )
        raise BadModelOption(
            f"{url_flag} gives {len(urls)} URLs for {len(names)} "
            f"model{'s' if len(names) > 1 else ''} ({model_flag} {','.join(names)}); "
            f"expected {allowed}"
        )
    return [check_base_url(u, url_flag) for u in urls], names


def local_models(base_urls: Sequence[str], models: Sequence[str]) -> list[LocalModel]:
    """The models of :func:`check_local_models`'s lists, paired (one URL: every model at it;
    else model i at URL i) and given their provider id: one provider per distinct URL in order
    of first appearance, :data:`PROVIDER_ID` for the first (so one model's configuration is
    what it was before mixed panels), ``local-2``, ``local-3``, … for the others.

    Raises:
        ValueError: no model, or another number of URLs than 1 or ``len(models)``.
    """
    if not models or len(base_urls) not in (1, len(models)):
        raise ValueError(f"{len(base_urls)} base URLs for {len(models)} models")
    urls = list(base_urls) * len(models) if len(base_urls) == 1 else list(base_urls)
    ids: dict[str, str] = {}
    for url in urls:
        ids.setdefault(url, PROVIDER_ID if not ids else f"{PROVIDER_ID}-{len(ids) + 1}")
    return [LocalModel(ids[url], url, name) for url, name in zip(urls, models, strict=True)]


def deal(models: Sequence[LocalModel], seats: Sequence[str]) -> dict[str, LocalModel]:
    """Each of ``seats`` (in order) with its model, round-robin: seat 1 on model 1, seat 2 on
    model 2, …, seat ``len(models) + 1`` on model 1 again.

    Raises:
        ValueError: no model.
    """
    if not models:
        raise ValueError("no model to seat")
    return {seat: models[i % len(models)] for i, seat in enumerate(seats)}


def seats_line(seats: Mapping[str, LocalModel]) -> str:
    """The seats and where they run, for a message: ``seat-a, seat-b on local/m at URL`` for one
    model; for several, the seats of each model in order of first appearance, ``;``-separated
    (``seat-a, seat-c on local/m at URL1; seat-b on local-2/n at URL2``)."""
    groups: dict[LocalModel, list[str]] = {}
    for seat, model in seats.items():
        groups.setdefault(model, []).append(seat)
    return "; ".join(f"{', '.join(s)} on {m.label} at {m.base_url}" for m, s in groups.items())


def provider_config(
    base_url: str, model: str, *, context: int = DEFAULT_CONTEXT, output: int = DEFAULT_OUTPUT
) -> dict[str, Any]:
    """The ``provider`` block of ``opencode.json`` for one model of a local server (``context``
    and ``output`` in tokens; ``output`` is what OpenCode asks the server for per reply)."""
    return providers_config(
        [LocalModel(PROVIDER_ID, base_url, model)], context=context, output=output
    )


def providers_config(
    models: Sequence[LocalModel], *, context: int = DEFAULT_CONTEXT, output: int = DEFAULT_OUTPUT
) -> dict[str, Any]:
    """The ``provider`` block of ``opencode.json`` for ``models``: one provider per provider id
    (in order of first appearance), each listing its models once with the same limits
    (``context`` and ``output`` in tokens; ``output`` is what OpenCode asks the server for per
    reply).

    Raises:
        ValueError: two models of one provider id at different URLs.
    """
    block: dict[str, Any] = {}
    for m in models:
        number = m.provider.removeprefix(PROVIDER_ID).removeprefix("-")
        entry = block.setdefault(
            m.provider,
            {
                "npm": "@ai-sdk/openai-compatible",
                "name": f"{PROVIDER_NAME} {number}" if number else PROVIDER_NAME,
                "options": {"baseURL": m.base_url, "apiKey": "unused"},
                "models": {},
            },
        )
        if entry["options"]["baseURL"] != m.base_url:
            raise ValueError(
                f"provider {m.provider} at both {entry['options']['baseURL']} and {m.base_url}"
            )
        entry["models"][m.name] = {"name": m.name, "limit": {"context": context, "output": output}}
    return block


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
    served = LocalModel(PROVIDER_ID, base_url, model)
    return with_local_models(
        config, [served], dict.fromkeys(seats, served), context=context, output=output
    )


def with_local_models(
    config: dict[str, Any],
    models: Sequence[LocalModel],
    seats: Mapping[str, LocalModel],
    *,
    context: int = DEFAULT_CONTEXT,
    output: int = DEFAULT_OUTPUT,
) -> dict[str, Any]:
    """``config`` (an ``opencode.json`` dict) with the providers of ``models`` added
    (:func:`providers_config`; ``context``/``output`` in tokens), the first model as the default
    (the built-in observer's and the title's), and each seat of ``seats`` (agent name → its
    model, e.g. :func:`deal`'s) on its model: an agent the config already defines keeps its
    prompt and settings but gets the model; a new one is a subagent with :data:`SEAT_PROMPT`
    and no tools (every permission denied).

    Raises:
        ValueError: no model; a seat's model not among ``models``; two models of one provider
            id at different URLs.
    """
    if not models:
        raise ValueError("no model to write")
    stray = [seat for seat, m in seats.items() if m not in models]
    if stray:
        raise ValueError(f"seats {', '.join(stray)} on a model not written")
    agents = dict(config.get("agent") or {})
    for name, model in seats.items():
        label = model.label
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
    default = models[0].label
    return {
        **config,
        "provider": {
            **(config.get("provider") or {}),
            **providers_config(models, context=context, output=output),
        },
        "model": default,
        "small_model": default,
        "agent": agents,
    }
