"""Validation of ``roundtable`` requests (docs/behaviour.md, 'The call'), shared by the control API
and the CLI.

Every failure raises :class:`~roundtabled.errors.ValidationFailed` whose message starts with
``Error:`` and names the field, the bad value and what is allowed. Input is untrusted
JSON: anything — wrong types, huge strings, nested junk — gives such an error, never a traceback.

Agent names (regression "duplicate names"): names are compared after stripping surrounding
whitespace and case-folding. A name with surrounding whitespace is refused (it would not match
the server's agent), and two names equal after folding are a duplicate; the error names the
duplicate and lists the available agents. So the accepted list always has exactly one seat per name.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from roundtabled.core import protocols
from roundtabled.core.prompts import default_title
from roundtabled.core.server_records import AgentRecord, SessionMarks
from roundtabled.core.sides import MAX_SIDE_CHARS, SIDE_WORDS
from roundtabled.core.state import (
    BUILTIN_OBSERVER,
    MAX_ROUNDS,
    MAX_TITLE_CHARS,
    MAX_TOTAL_ROUNDS,
    OBSERVER_AGENT,
    Budget,
    ContextMode,
    ModelRef,
    Opening,
    PermissionPolicy,
    ProtocolName,
    Until,
    observer_agent_of,
)
from roundtabled.errors import ValidationFailed

MAX_PROMPT_CHARS = 100_000
"""Upper bound of ``prompt`` in characters (a topic, not a document)."""
MAX_AGENTS = 12
"""Upper bound of seats at one table."""
SESSION_ID_RE = re.compile(r"^ses_[A-Za-z0-9]{6,64}$")
SESSION_ID_FORM = "'ses_' then 6 to 64 letters or digits"
""":data:`SESSION_ID_RE` in words, for the refusals of an id that does not match it."""
ALLOWED_KEYS = {
    "agents",
    "prompt",
    "rounds",
    "observer",
    "sessionID",
    "title",
    "parentSessionID",
    "directory",
    "toolCallID",
    "toolMessageID",
    "turnTimeout",
    "permissionPolicy",
    "extendMode",
    "until",
    "budget",
    "opening",
    "context",
    "preset",
    "sides",
    "dryRun",
    "protocol",
    "adaptiveThreshold",
}
BUDGET_KEYS = ("tokens", "usd", "seconds")
"""Keys of ``budget``; any subset, each a positive number (``tokens`` an integer)."""
MAX_BUDGET_TOKENS = 1_000_000_000
MAX_BUDGET_USD = 1_000_000.0
MAX_BUDGET_SECONDS = 7 * 86_400.0
PRESET_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True, slots=True)
class RoundtableRequest:
    """A checked ``roundtable`` call. ``rounds`` 1–50; ``turn_timeout`` seconds or ``None``."""

    prompt: str
    agents: tuple[str, ...] | None
    rounds: int
    observer: str | None
    session_id: str | None
    title: str | None
    parent_session_id: str | None
    directory: str | None
    tool_call_id: str | None
    tool_message_id: str | None
    turn_timeout: float | None
    permission_policy: PermissionPolicy | None
    extend_mode: Literal["continuation", "new-topic"] | None
    until: Until | None = None
    budget: Budget | None = None
    opening: Opening | None = None
    context: ContextMode | None = None
    preset: str | None = None
    sides: Mapping[str, str] | None = None
    """Seat → assigned side (:func:`parse_sides`); ``None``: every seat is free."""
    dry_run: bool = False
    """Print the plan (:mod:`roundtabled.core.estimate`) instead of running it."""
    protocol: ProtocolName | None = None
    """How the seats reach an answer (:mod:`roundtabled.core.protocols`); ``None``: ``debate``."""
    adaptive_threshold: float | None = None
    """``adaptive``'s stop share in (0.5, 1]; ``None``: the default."""
    given: frozenset[str] = field(default_factory=frozenset)
    """The body keys the caller set (non-null): what a preset must not override."""

    @property
    def extend(self) -> bool:
        """True when the call continues a concluded roundtable (``sessionID`` given)."""
        return self.session_id is not None


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _opt_str(body: Mapping[str, Any], key: str, *, max_len: int = 1000) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationFailed(key, f"{key} must be a string, got {_short(value)}")
    if len(value) > max_len:
        raise ValidationFailed(key, f"{key} must be at most {max_len} characters, got {len(value)}")
    return value


def parse_request(body: object) -> RoundtableRequest:
    """Check the shape of a request body (no server look-ups yet).

    Args:
        body: decoded JSON of ``POST /v1/roundtables`` (see docs/control-api.md).

    Raises:
        ValidationFailed: naming the first bad field.
    """
    if not isinstance(body, Mapping):
        raise ValidationFailed(
            "body", "the request body must be a JSON object with at least 'prompt'"
        )
    unknown = sorted(str(k) for k in body if k not in ALLOWED_KEYS)
    if unknown:
        raise ValidationFailed(
            unknown[0] or "body",  # an empty key still gets a field to point at
            f"unknown field {unknown[0]!r}; allowed fields: " + ", ".join(sorted(ALLOWED_KEYS)),
        )
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValidationFailed(
            "prompt", "prompt must be a non-empty string (the topic), got " + _short(prompt)
        )
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValidationFailed(
            "prompt", f"prompt must be at most {MAX_PROMPT_CHARS} characters, got {len(prompt)}"
        )
    session_id = _opt_str(body, "sessionID", max_len=100)
    if session_id is not None and not SESSION_ID_RE.match(session_id):
        raise ValidationFailed(
            "sessionID",
            f"sessionID must be {SESSION_ID_FORM}, got {_short(session_id)}",
        )
    agents_raw = body.get("agents")
    agents: tuple[str, ...] | None = None
    if agents_raw is not None:
        if not isinstance(agents_raw, list) or not all(isinstance(a, str) for a in agents_raw):
            raise ValidationFailed(
                "agents",
                f"agents must be a list of agent names (strings), got {_short(agents_raw)}",
            )
        agents = tuple(agents_raw)
    elif session_id is None and body.get("preset") is None:
        raise ValidationFailed(
            "agents",
            "agents is required for a new roundtable: give at "
            "least 2 agent names in speaking order (or a preset)",
        )
    rounds_raw = body.get("rounds", 1)
    if rounds_raw is None:
        rounds_raw = 1
    if (
        isinstance(rounds_raw, bool)
        or not isinstance(rounds_raw, int | float)
        or (isinstance(rounds_raw, float) and not rounds_raw.is_integer())
    ):
        raise ValidationFailed(
            "rounds", f"rounds must be an integer from 1 to {MAX_ROUNDS}, got {_short(rounds_raw)}"
        )
    rounds = int(rounds_raw)
    if not 1 <= rounds <= MAX_ROUNDS:
        raise ValidationFailed(
            "rounds", f"rounds must be an integer from 1 to {MAX_ROUNDS}, got {rounds}"
        )
    title = _opt_str(body, "title", max_len=10_000)
    if title is not None:
        if not title.strip():
            raise ValidationFailed("title", "title must not be empty (omit it for the default)")
        if len(title) > MAX_TITLE_CHARS:
            raise ValidationFailed(
                "title", f"title must be at most {MAX_TITLE_CHARS} characters, got {len(title)}"
            )
    observer = _opt_str(body, "observer", max_len=200)
    parent = _opt_str(body, "parentSessionID", max_len=100)
    if parent is not None and not SESSION_ID_RE.match(parent):
        raise ValidationFailed(
            "parentSessionID", f"parentSessionID must be {SESSION_ID_FORM}, got {_short(parent)}"
        )
    directory = _opt_str(body, "directory", max_len=4096)
    if directory is not None and not directory.startswith("/"):
        raise ValidationFailed(
            "directory", "directory must be an absolute path, got " + _short(directory)
        )
    timeout_raw = body.get("turnTimeout")
    turn_timeout: float | None = None
    if timeout_raw is not None:
        if (
            isinstance(timeout_raw, bool)
            or not isinstance(timeout_raw, int | float)
            or not (1 <= timeout_raw <= 86_400)
        ):
            raise ValidationFailed(
                "turnTimeout",
                "turnTimeout must be a number of seconds from "
                f"1 to 86400, got {_short(timeout_raw)}",
            )
        turn_timeout = float(timeout_raw)
    policy_raw = body.get("permissionPolicy")
    policy: PermissionPolicy | None = None
    if policy_raw is not None:
        try:
            policy = PermissionPolicy(policy_raw)
        except ValueError:
            raise ValidationFailed(
                "permissionPolicy",
                "permissionPolicy must be one of "
                + ", ".join(p.value for p in PermissionPolicy)
                + f", got {_short(policy_raw)}",
            ) from None
    mode_raw = body.get("extendMode")
    mode: Literal["continuation", "new-topic"] | None = None
    if mode_raw is not None:
        if mode_raw not in ("continuation", "new-topic"):
            raise ValidationFailed(
                "extendMode",
                f"extendMode must be 'continuation' or 'new-topic', got {_short(mode_raw)}",
            )
        mode = mode_raw
    until = _choice(body, "until", get_args(Until))
    opening = _choice(body, "opening", get_args(Opening))
    context = _choice(body, "context", get_args(ContextMode))
    if opening is not None and session_id is not None:
        raise ValidationFailed(
            "opening",
            "opening applies to a new roundtable only (its round 1); omit it when extending",
        )
    if until == "converged" and session_id is None and body.get("rounds") == 1:
        # The convergence rule compares a round with the one before it (docs/deliberation.md),
        # so it cannot end a one-round roundtable early: such a call is a mistake.
        raise ValidationFailed(
            "rounds",
            "until 'converged' needs rounds of at least 2 (convergence compares a round with "
            "the one before it, so it never fires in round 1); got rounds 1",
        )
    preset = _opt_str(body, "preset", max_len=200)
    if preset is not None and not PRESET_NAME_RE.match(preset):
        raise ValidationFailed(
            "preset",
            "preset must be a preset name from the configuration (letters, digits, '_', '-', "
            f"'.'; see `roundtabled presets`), got {_short(preset)}",
        )
    if preset is not None and session_id is not None:
        raise ValidationFailed(
            "preset", "preset applies to a new roundtable only; omit it when extending"
        )
    sides = parse_sides(body.get("sides"))
    if sides is not None and session_id is not None:
        raise ValidationFailed(
            "sides", "sides applies to a new roundtable only; omit it when extending"
        )
    if sides is not None and agents is not None:
        check_sides(sides, agents)
    dry_run = body.get("dryRun")
    if dry_run is not None and not isinstance(dry_run, bool):
        raise ValidationFailed("dryRun", f"dryRun must be true or false, got {_short(dry_run)}")
    if dry_run and session_id is not None:
        raise ValidationFailed(
            "dryRun", "dryRun previews a new roundtable only; omit it when extending"
        )
    protocol = _choice(body, "protocol", protocols.NAMES)
    threshold = parse_threshold(body.get("adaptiveThreshold"))
    return check_protocol(
        RoundtableRequest(
            prompt=prompt,
            agents=agents,
            rounds=rounds,
            observer=observer,
            session_id=session_id,
            title=title,
            parent_session_id=parent,
            directory=directory,
            tool_call_id=_opt_str(body, "toolCallID", max_len=200),
            tool_message_id=_opt_str(body, "toolMessageID", max_len=200),
            turn_timeout=turn_timeout,
            permission_policy=policy,
            extend_mode=mode,
            until=until,
            budget=parse_budget(body.get("budget")),
            opening=opening,
            context=context,
            preset=preset,
            sides=sides,
            dry_run=bool(dry_run),
            protocol=protocol,
            adaptive_threshold=threshold,
            given=frozenset(str(k) for k, v in body.items() if v is not None),
        )
    )


def parse_threshold(raw: object) -> float | None:
    """Check ``adaptiveThreshold``: a share in (0.5, 1] (``None``: not given).

    Raises:
        ValidationFailed: field ``adaptiveThreshold``, not a number in (0.5, 1].
    """
    if raw is None:
        return None
    if (
        isinstance(raw, bool)
        or not isinstance(raw, int | float)
        or not math.isfinite(raw)
        or not 0.5 < raw <= 1.0
    ):
        raise ValidationFailed(
            "adaptiveThreshold",
            "adaptiveThreshold must be a share above 0.5 and at most 1 (the confidence-weighted "
            f"share of the leading stance at which adaptive stops), got {_short(raw)}",
        )
    return float(raw)


_REQUEST_FIELD = {
    "rounds": "rounds",
    "until": "until",
    "opening": "opening",
    "context": "context",
    "sides": "sides",
    "budget": "budget",
    "adaptiveThreshold": "adaptive_threshold",
}
"""A call field a protocol may refuse → its :class:`RoundtableRequest` attribute."""


def check_protocol(
    req: RoundtableRequest, preset: str | None = None, filled: frozenset[str] = frozenset()
) -> RoundtableRequest:
    """Refuse what ``req``'s protocol does not use, and give it the protocol's default rounds.

    Run on the call (:func:`parse_request`) and again once its preset filled it in
    (:func:`apply_preset`), so ``start`` and ``dryRun`` are checked alike. ``preset``: the name
    of the preset whose values are being checked, ``filled``: the fields it set (such a field
    is named as the preset's in the error).

    Raises:
        ValidationFailed: naming the first field the protocol refuses, the protocol and why
            (``rounds is not used by protocol 'vote' (every seat answers once); omit it``);
            field ``sessionID`` for an extend when the protocol is not ``debate`` (a protocol is
            chosen when a roundtable starts).
    """
    name: ProtocolName = req.protocol or "debate"
    if req.extend and req.protocol is not None:
        raise ValidationFailed(
            "protocol", "protocol applies to a new roundtable only; omit it when extending"
        )
    given: dict[str, object] = {}
    for key, attr in _REQUEST_FIELD.items():
        value = getattr(req, attr)
        if key == "rounds" and "rounds" not in req.given:
            continue  # the call's default, not the caller's choice
        given[key] = value
    found = protocols.refused(name, given)
    if found is not None:
        key, line = found
        if preset is not None and key in filled:
            line = line.replace(key, f"{key} (of preset {preset!r})", 1)
        raise ValidationFailed(key, line)
    spec = protocols.of(name)
    if spec.default_rounds is not None and "rounds" not in req.given and not req.extend:
        return replace(req, rounds=spec.default_rounds)
    return req


def _choice(body: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if value not in allowed:
        raise ValidationFailed(
            key,
            f"{key} must be one of "
            + ", ".join(repr(a) for a in allowed)
            + f", got {_short(value)}",
        )
    return value


_SIDES_ALLOWED = (
    ", ".join(SIDE_WORDS)
    + f", or a one-line brief of two words or more, at most {MAX_SIDE_CHARS} characters"
)


def unknown_roundtable(ses: str) -> str:
    """The one wording of an id that names no roundtable of this daemon, whichever command or
    route was asked (``status``, ``watch``, ``export``, ``cancel``, ``extend``)."""
    return f"no roundtable {ses!r} is known to this daemon"


def parse_sides(raw: object, field_name: str = "sides") -> dict[str, str] | None:
    """Check a ``sides`` object: seat name → side (docs/result.md, "Sides").

    Args:
        raw: the decoded JSON value (``None``: no sides), e.g. ``{"rv": "against"}``.
        field_name: the name errors use (``sides``).

    Returns:
        The sides with each value stripped and a named side (:data:`SIDE_WORDS`, any case) in
        lower case; ``None`` when ``raw`` is ``None``.

    Raises:
        ValidationFailed: not an object of strings, an empty, multi-line or over-long side, or a
            seat named twice (names compared case-folded, like ``agents``).
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise ValidationFailed(
            field_name,
            f"{field_name} must be an object of seat name → side ({_SIDES_ALLOWED}), "
            f"got {_short(raw)}",
        )
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for seat, value in raw.items():
        key = seat.casefold()
        if key in seen:
            raise ValidationFailed(
                field_name,
                f"{field_name} gives seat {seen[key]!r} a side twice (as {seen[key]!r} and "
                f"{seat!r}); one side per seat",
            )
        seen[key] = seat
        side = value.strip()
        if side.casefold() in SIDE_WORDS:
            side = side.casefold()
        if not side or "\n" in side or "\r" in side or len(side) > MAX_SIDE_CHARS:
            why = (
                "is empty"
                if not side
                else "has more than one line"
                if ("\n" in side or "\r" in side)
                else f"has {len(side)} characters"
            )
            raise ValidationFailed(
                field_name,
                f"{field_name}: the side of {seat!r} {why}; allowed: {_SIDES_ALLOWED}",
            )
        if side not in SIDE_WORDS and len(side.split()) == 1:
            # A brief is a sentence; one word that is no side is a typo until shown otherwise
            # (``agianst`` taken as a brief would bind the seat to the word).
            near = difflib.get_close_matches(side.casefold(), SIDE_WORDS, n=1, cutoff=0.5)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise ValidationFailed(
                field_name,
                f"{field_name}: the side of {seat!r} is {side!r}, one word that is no side; "
                f"{hint}allowed: {_SIDES_ALLOWED}",
            )
        out[seat] = side
    return out


def check_sides(sides: Mapping[str, str], agents: Sequence[str], field_name: str = "sides") -> None:
    """Every seat named in ``sides`` sits at the table (exactly as named in ``agents``).

    Raises:
        ValidationFailed: naming the first side for a seat that is not in ``agents``.
    """
    for seat in sides:
        if seat not in agents:
            raise ValidationFailed(
                field_name,
                f"{field_name} names {seat!r}, which is not a seat of this roundtable; seats: "
                + ", ".join(agents),
            )


def parse_budget(raw: object, field_name: str = "budget") -> Budget | None:
    """Check a ``budget`` object: ``{"tokens": N, "usd": X, "seconds": S}``, any subset.

    Args:
        raw: the decoded JSON value (``None``: no budget).
        field_name: the name errors use (``budget``).

    Returns:
        The :class:`~roundtabled.core.state.Budget`, or ``None`` when ``raw`` is ``None``.

    Raises:
        ValidationFailed: not an object, an unknown key, an empty object, or a value that is not
            a positive finite number (``tokens``: an integer) up to its bound.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValidationFailed(
            field_name,
            f"{field_name} must be an object with any of {', '.join(BUDGET_KEYS)}, "
            f"got {_short(raw)}",
        )
    unknown = sorted(str(k) for k in raw if k not in BUDGET_KEYS)
    if unknown:
        raise ValidationFailed(
            field_name,
            f"unknown {field_name} key {unknown[0]!r}; allowed keys: " + ", ".join(BUDGET_KEYS),
        )
    values: dict[str, float | int] = {}
    bounds = {"tokens": MAX_BUDGET_TOKENS, "usd": MAX_BUDGET_USD, "seconds": MAX_BUDGET_SECONDS}
    units = {"tokens": "an integer number of tokens", "usd": "US dollars", "seconds": "seconds"}
    for key in BUDGET_KEYS:
        value = raw.get(key)
        if value is None:
            continue
        ok = (
            not isinstance(value, bool)
            and isinstance(value, int | float)
            and math.isfinite(value)
            and 0 < value <= bounds[key]
            and (key != "tokens" or float(value).is_integer())
        )
        if not ok:
            raise ValidationFailed(
                field_name,
                f"{field_name}.{key} must be a positive number (finite, {units[key]}, at most "
                f"{bounds[key]:g}), got {_short(value)}",
            )
        values[key] = int(value) if key == "tokens" else float(value)
    if not values:
        raise ValidationFailed(
            field_name,
            f"{field_name} must set at least one of {', '.join(BUDGET_KEYS)} (omit it for none)",
        )
    return Budget.model_validate(values)


@dataclass(frozen=True, slots=True)
class PresetSpec:
    """A named panel from the configuration (``[presets.NAME]`` in config.toml).

    Every field is optional; ``title_prefix`` is put before the roundtable's title.
    """

    agents: tuple[str, ...] | None = None
    rounds: int | None = None
    observer: str | None = None
    until: Until | None = None
    budget: Budget | None = None
    opening: Opening | None = None
    context: ContextMode | None = None
    title_prefix: str | None = None
    sides: Mapping[str, str] | None = None
    protocol: ProtocolName | None = None
    adaptive_threshold: float | None = None


def apply_preset(
    req: RoundtableRequest,
    presets: Mapping[str, PresetSpec],
    default_budget: Budget | None = None,
) -> RoundtableRequest:
    """Fill what the call did not set from its preset, then the configuration's default budget.

    Args:
        req: the checked request (:func:`parse_request`).
        presets: the configured presets by name.
        default_budget: the configuration's ``budget_tokens/usd/seconds`` (``None``: none); it
            applies when neither the call nor its preset gives a budget.

    Returns:
        The request with the preset's values where the call gave none (explicit arguments
        override the preset) and the title prefixed with the preset's ``title_prefix``.

    Raises:
        ValidationFailed: field ``preset`` for an unknown name (listing the available ones), or
            ``agents`` when neither the call nor the preset names the seats.
    """
    if req.preset is None:
        if req.budget is None and default_budget is not None and not default_budget.empty():
            return replace(req, budget=default_budget)
        return req
    spec = presets.get(req.preset)
    if spec is None:
        names = ", ".join(sorted(presets)) or "none are configured"
        raise ValidationFailed(
            "preset",
            f"unknown preset {req.preset!r}; available presets: {names} "
            "(configured as [presets.NAME] in config.toml)",
        )
    given = req.given
    changes: dict[str, Any] = {}
    if "agents" not in given and spec.agents is not None:
        changes["agents"] = spec.agents
    if "rounds" not in given and spec.rounds is not None:
        changes["rounds"] = spec.rounds
    fields = ("observer", "until", "opening", "context", "budget", "sides", "protocol")
    for name in (*fields, "adaptive_threshold"):
        key = "adaptiveThreshold" if name == "adaptive_threshold" else name
        if key not in given and getattr(spec, name) is not None:
            changes[name] = getattr(spec, name)
    out = replace(req, **changes)
    if changes:
        # What the preset filled in must suit the protocol as much as what the call gave.
        filled = frozenset("adaptiveThreshold" if k == "adaptive_threshold" else k for k in changes)
        checked = replace(out, given=out.given | filled)
        out = replace(check_protocol(checked, preset=req.preset, filled=filled), given=req.given)
    if out.agents is None:
        raise ValidationFailed(
            "agents",
            f"preset {req.preset!r} names no agents; give agents in the call or in "
            f"[presets.{req.preset}]",
        )
    if out.sides is not None:
        where = "sides" if "sides" in given else f"sides (of preset {req.preset!r})"
        try:
            check_sides(out.sides, out.agents)
        except ValidationFailed as exc:
            raise ValidationFailed("sides", str(exc).replace("sides", where, 1)) from None
    if spec.title_prefix:
        title = spec.title_prefix + (out.title or default_title(out.prompt))
        out = replace(out, title=title[:MAX_TITLE_CHARS])
    if out.budget is None and default_budget is not None and not default_budget.empty():
        out = replace(out, budget=default_budget)
    return out


def check_extend_rounds(total_rounds: int, more: int) -> None:
    """Refuse an extension that would take a roundtable past :data:`MAX_TOTAL_ROUNDS` rounds.

    Args:
        total_rounds: the rounds the roundtable has so far (all earlier calls).
        more: the ``rounds`` of this ``extend`` call (already checked to be 1–50).

    Raises:
        ValidationFailed: field ``rounds``, naming how many rounds may still be added.
    """
    if total_rounds + more > MAX_TOTAL_ROUNDS:
        left = max(0, MAX_TOTAL_ROUNDS - total_rounds)
        raise ValidationFailed(
            "rounds",
            f"this roundtable already has {total_rounds} rounds; extending by {more} would make "
            f"{total_rounds + more}, more than {MAX_TOTAL_ROUNDS} in all"
            + (f" (at most {left} more)" if left else " (it cannot be extended further)"),
        )


def seat_agents(available: Sequence[AgentRecord]) -> list[str]:
    """Names of agents a person may seat (not hidden), sorted, from a directory's agents as the
    server port reads them (what ``GET /v1/agents`` and a refused start list:
    docs/control-api.md)."""
    return sorted(a.id for a in available if not a.hidden)


def check_agents(
    agents: Sequence[str], observer: str | None, available: Sequence[AgentRecord]
) -> None:
    """Check seats and observer against the server's agents (docs/behaviour.md, 'Phases', step
    1). ``available``: the directory's agents as the server port reads them, hidden ones
    included (a hidden agent takes no seat).

    Raises:
        ValidationFailed: fewer than 2 agents, more than 12, a duplicate (see module docstring),
            an unknown name, or an unknown observer; the message lists the available agents.
    """
    names = seat_agents(available)
    listing = "Available agents: " + ", ".join(names)
    if len(agents) < 2:
        raise ValidationFailed(
            "agents",
            f"agents needs at least 2 names, got {len(agents)} ({_short(list(agents))}). {listing}",
        )
    if len(agents) > MAX_AGENTS:
        raise ValidationFailed(
            "agents", f"agents takes at most {MAX_AGENTS} names, got {len(agents)}. {listing}"
        )
    seen: dict[str, str] = {}
    for name in agents:
        if name != name.strip() or not name:
            raise ValidationFailed(
                "agents",
                f"agent name {name!r} has surrounding whitespace or "
                f"is empty; write it exactly. {listing}",
            )
        key = name.casefold()
        if key in seen:
            raise ValidationFailed(
                "agents",
                f"agent {name!r} appears more than once (as "
                f"{seen[key]!r} and {name!r}); each agent takes one seat. "
                f"{listing}",
            )
        seen[key] = name
    known = set(names)
    for name in agents:
        if name not in known:
            raise ValidationFailed("agents", f"unknown agent {name!r}. {listing}")
    if observer is not None and observer != BUILTIN_OBSERVER and observer not in known:
        raise ValidationFailed(
            "observer",
            f"unknown observer agent {observer!r}; omit it for the built-in observer. {listing}",
        )


def needs_default_model(
    agents: Sequence[str], observer: str | None, available: Sequence[AgentRecord]
) -> bool:
    """Whether a seat of ``agents`` or ``observer``'s agent (``None``: no observer, as an eval
    report's :func:`listed_models`) is an agent of ``available`` with no model of its own: only
    then does :func:`seat_models` need the directory's default model (a start reads it only then
    where it costs a request of its own)."""
    models = {a.id: a.model for a in available}
    names = [*agents, *([observer_agent_of(observer)] if observer is not None else [])]
    return any(name in models and models[name] is None for name in names)


def _own_or_default(
    name: str, by_name: Mapping[str, ModelRef | None], default: ModelRef | None
) -> ModelRef | None:
    """The seat rule: agent ``name``'s own model, else the directory's ``default``."""
    return by_name.get(name) or default


def listed_models(
    agents: Sequence[str], available: Sequence[AgentRecord], default: ModelRef | None
) -> dict[str, ModelRef]:
    """The models the seats ``agents`` run on, by the seat rule of :func:`seat_models` (the
    agent's own, else the directory's ``default``), for the agents ``available`` lists, in seat
    order. Where a start refuses, this leaves the seat out: an agent not listed, or one without a
    model when there is no default. What an eval report names (roundtabled/eval/server.py,
    docs/eval.md): it reports the models a run's seats run on and leaves the refusal to the
    daemon's start."""
    by_name = {a.id: a.model for a in available}
    out: dict[str, ModelRef] = {}
    for name in agents:
        if name in by_name and (ref := _own_or_default(name, by_name, default)) is not None:
            out[name] = ref
    return out


def seat_models(
    agents: Sequence[str],
    observer: str,
    available: Sequence[AgentRecord],
    default: ModelRef | None,
    *,
    install: str,
) -> dict[str, ModelRef]:
    """The model of each seat and of the observer's agent (``observer``: the built-in one or an
    agent's name): the agent's own, else the directory's ``default`` (``None``: it has none).
    The one rule of a start on either major (docs/behaviour.md, 'Phases', step 1); the seats are
    checked first (:func:`check_agents`). ``install``: the command that installs the built-in
    observer on this server's major, named in its refusal.

    Raises:
        ValidationFailed: the built-in observer is not installed (field ``observer``); an agent
            has no model and the server no default (field ``agents``).
    """
    by_name = {a.id: a.model for a in available}
    if observer == BUILTIN_OBSERVER and OBSERVER_AGENT not in by_name:
        raise ValidationFailed(
            "observer",
            f"the built-in observer agent '{OBSERVER_AGENT}' is not installed for this "
            f"project; run {install}, or name an observer agent",
        )
    models: dict[str, ModelRef] = {}
    for name in [*agents, observer_agent_of(observer)]:
        ref = _own_or_default(name, by_name, default)
        if ref is None:
            raise ValidationFailed(
                "agents",
                f"agent {name!r} has no model and the server has no default "
                "model; set `model` in opencode.json",
            )
        models[name] = ref
    return models


def check_parent_session(session_id: str, marks: SessionMarks) -> None:
    """S1 (``session_id``, its ``marks`` read from the server) may convene a roundtable: it is
    neither a roundtable's own session nor a seat's session of an independent opening, where a
    result delivered would become a part of that debate, fed to its seats on a later extend.

    Raises:
        ValidationFailed: field ``parentSessionID``, naming what the session is.
    """
    if marks.indexed:
        raise ValidationFailed(
            "parentSessionID",
            f"parent session {session_id!r} is a roundtable's own session; name the session "
            "that convenes the roundtable (or none)",
        )
    if marks.opening_of is not None:
        raise ValidationFailed(
            "parentSessionID",
            f"parent session {session_id!r} is a seat's session of roundtable "
            f"{marks.opening_of}'s independent opening; name the session that convenes the "
            "roundtable (or none)",
        )


def turn_timeout_value(value: float | str | None) -> float | None:
    """A ``--turn-timeout`` flag's value (seconds, a number or as typed; ``None``: not given)
    checked by the rule of the call's ``turnTimeout`` (:func:`parse_request`): a typed whole
    number stays whole in the message ("got 0", not "got 0.0"), a word is named as typed.

    Raises:
        ValidationFailed: field ``turnTimeout``, not a number of seconds from 1 to 86400 (NaN
            and infinity included: JSON has neither, so a caller checks before it sends).
    """
    if value is None:
        return None
    number: object = value
    if isinstance(value, str):
        for kind in (int, float):
            try:
                number = kind(value)
                break
            except ValueError:
                continue
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    return parse_request(
        {"prompt": "turn timeout check", "agents": [], "turnTimeout": number}
    ).turn_timeout
