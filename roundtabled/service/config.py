"""Daemon settings: the one place that reads the environment and the configuration file.

Precedence, lowest first: field defaults < TOML file < environment < command-line overrides.

- TOML file: ``$ROUNDTABLED_CONFIG`` or ``$XDG_CONFIG_HOME/roundtabled/config.toml``; flat
  ``key = value`` pairs named like the fields (``turn_timeout = 60``). A missing default file is
  fine; a file named explicitly (argument or ``ROUNDTABLED_CONFIG``) must exist.
- Environment: ``ROUNDTABLED_<FIELD>`` (``ROUNDTABLED_TURN_TIMEOUT=5``); lists are comma-separated,
  booleans are ``true/false/1/0/yes/no/on/off``. ``OPENCODE_SERVER_PASSWORD`` and
  ``OPENCODE_SERVER_USERNAME`` (what ``opencode serve`` reads) are accepted too, below their
  ``ROUNDTABLED_`` forms. Other ``ROUNDTABLED_*`` variables do not set anything; every command
  warns about them on stderr (:func:`unknown_environment`), naming the closest known one.
- Command line: a mapping of field names to values; ``None`` means "not given".

Invariants
- Every invalid value (unknown TOML key, wrong type, out of range, non-loopback control host)
  raises :class:`ConfigError` with one message that names the key as the user wrote it (TOML key,
  environment variable, ``--flag``), the bad value and what is allowed; never a pydantic trace.
- The password is a :class:`~pydantic.SecretStr`, never shown: :meth:`Settings.masked` prints
  ``"********"``; error messages never echo it. The control token file is never read here.
- :class:`Settings` is frozen.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

import yarl
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from roundtabled.core import protocols
from roundtabled.core.state import (
    Budget,
    ContextMode,
    Opening,
    Options,
    PermissionPolicy,
    Until,
)
from roundtabled.core.validation import PRESET_NAME_RE, PresetSpec, parse_budget, parse_request
from roundtabled.engine.settings import Settings as EngineSettings
from roundtabled.errors import RoundtableError, ValidationFailed

__all__ = [
    "ENV_PREFIX",
    "PRESET_KEYS",
    "ConfigError",
    "Settings",
    "default_config_file",
    "load_settings",
    "xdg_config_home",
    "xdg_state_home",
]

ENV_PREFIX = "ROUNDTABLED_"
"""Prefix of the environment variables that set fields."""

_MASK = "********"


class ConfigError(RoundtableError):
    """An invalid setting. ``key`` is the key as written in its source (TOML key, env var, flag)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(message)


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path.home()


def _xdg(env: Mapping[str, str] | None, var: str, fallback: str) -> Path:
    env = os.environ if env is None else env
    value = env.get(var, "")
    # XDG base directory spec: a relative value is invalid and must be ignored.
    if value and Path(value).is_absolute():
        return Path(value)
    return _home(env) / fallback


def xdg_config_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME`` (if absolute) or ``$HOME/.config``, read from ``env`` (default:
    ``os.environ``)."""
    return _xdg(env, "XDG_CONFIG_HOME", ".config")


def xdg_state_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME`` (absolute) or ``$HOME/.local/state``, read from ``env``."""
    return _xdg(env, "XDG_STATE_HOME", ".local/state")


def default_config_file(env: Mapping[str, str] | None = None) -> Path:
    """``$ROUNDTABLED_CONFIG`` or ``$XDG_CONFIG_HOME/roundtabled/config.toml``."""
    env = os.environ if env is None else env
    named = env.get(ENV_PREFIX + "CONFIG")
    if named:
        return Path(named).expanduser()
    return xdg_config_home(env) / "roundtabled" / "config.toml"


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and a loopback address (``127.0.0.1``, ``[::1]``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


_ENGINE = EngineSettings()
"""The engine's defaults (:mod:`roundtabled.engine.settings`); the per-roundtable ones are
:class:`roundtabled.core.state.Options`' (``_ENGINE.roundtable``). One copy of each."""
_ROUNDTABLE = _ENGINE.roundtable


class Settings(BaseModel):
    """All daemon settings, with defaults. Times are seconds; paths are absolute after loading."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    server_url: str = "http://127.0.0.1:4096"
    """Base URL of the OpenCode server (``opencode serve``)."""
    server_username: str = "opencode"
    """HTTP basic-auth user of the OpenCode server."""
    server_password: SecretStr | None = None
    """HTTP basic-auth password of the OpenCode server (also ``OPENCODE_SERVER_PASSWORD``)."""
    control_host: str = "127.0.0.1"
    """Where the control API listens: a loopback address, ``localhost`` or ``unix:/abs/path``."""
    control_port: int = Field(default=4747, ge=0, le=65535)
    """TCP port of the control API; 0 picks a free port."""
    token_file: Path = Field(default_factory=lambda: xdg_config_home() / "roundtabled" / "token")
    """Bearer token of the control API (created by the daemon, mode 0600)."""
    key_file: Path = Field(
        default_factory=lambda: xdg_config_home() / "roundtabled" / "signing-key"
    )
    """HMAC key that signs state blocks and markers (created by the daemon, mode 0600)."""
    state_dir: Path = Field(default_factory=lambda: xdg_state_home() / "roundtabled")
    """Directory for the daemon's local files (logs, pid)."""
    directories: list[str] = Field(default_factory=list)
    """Project directories whose sessions are scanned for roundtables at start-up."""
    turn_timeout: float = Field(
        default=_ROUNDTABLE.turn_timeout, ge=1, le=86400, allow_inf_nan=False
    )
    """Seconds a turn may run before it is aborted and skipped (docs/behaviour.md, 'Turn
    timeout')."""
    loop_threshold: float = Field(
        default=_ROUNDTABLE.loop_threshold, gt=0, le=1, allow_inf_nan=False
    )
    """Bigram Jaccard similarity above which the debate ends as a loop (docs/behaviour.md,
    'Loops')."""
    resync_period: float = Field(
        default=_ENGINE.resync_period, ge=0.5, le=3600, allow_inf_nan=False
    )
    """Seconds between two full resyncs of the active roundtables with the server."""
    permission_policy: PermissionPolicy = _ROUNDTABLE.permission_policy
    """Answer to a seat's permission request: reject, allow-once or ask (leave it to a person)."""
    log_format: Literal["text", "json"] = "text"
    """Log line format."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """Lowest level logged."""
    usage_footer: bool = _ROUNDTABLE.usage_footer
    """Append a token/cost footer to the result delivered to S1."""
    hide_past_prompts: bool = _ROUNDTABLE.hide_past_prompts
    """Mark earlier turn prompts as ignored so models see only the current one."""
    progress_toasts: bool = _ENGINE.progress_toasts
    """A TUI toast per finished turn (at most one per 2 s) and per phase change."""
    http_timeout: float = Field(default=30.0, gt=0, le=3600, allow_inf_nan=False)
    """Seconds an HTTP request to the OpenCode server may take."""
    max_concurrency: int = Field(default=16, ge=1, le=1024)
    """Maximum simultaneous requests to the OpenCode server."""
    shutdown_window: float = Field(default=8.0, ge=0, le=600, allow_inf_nan=False)
    """Seconds given to in-flight work after SIGTERM before the daemon exits."""
    budget_tokens: int | None = Field(default=None, ge=1, le=1_000_000_000)
    """Default token budget (input + output) of a roundtable call that gives none."""
    budget_usd: float | None = Field(default=None, gt=0, le=1_000_000, allow_inf_nan=False)
    """Default cost budget (USD, the server's cost) of a roundtable call that gives none."""
    budget_seconds: float | None = Field(default=None, gt=0, le=604_800, allow_inf_nan=False)
    """Default wall-time budget (seconds) of a roundtable call that gives none."""
    presets: dict[str, PresetSpec] = Field(default_factory=dict)
    """Named panels (``[presets.NAME]`` tables in the TOML file only; see docs/deliberation.md)."""

    def engine_settings(self) -> EngineSettings:
        """The engine's knobs from these settings (the engine reads no configuration itself)."""
        return EngineSettings(
            roundtable=Options(
                turn_timeout=self.turn_timeout,
                loop_threshold=self.loop_threshold,
                permission_policy=self.permission_policy,
                usage_footer=self.usage_footer,
                hide_past_prompts=self.hide_past_prompts,
            ),
            resync_period=self.resync_period,
            progress_toasts=self.progress_toasts,
            state_dir=self.state_dir,
            directories=tuple(self.directories),
        )

    def default_budget(self) -> Budget | None:
        """The configured default budget, or ``None`` when no ``budget_*`` key is set."""
        if self.budget_tokens is None and self.budget_usd is None and self.budget_seconds is None:
            return None
        return Budget(tokens=self.budget_tokens, usd=self.budget_usd, seconds=self.budget_seconds)

    @field_validator("control_host")
    @classmethod
    def _loopback_only(cls, value: str) -> str:
        if value.startswith("unix:"):
            if not Path(value[5:]).is_absolute():
                raise ValueError("unix socket path must be absolute")
            return value
        if not is_loopback_host(value):
            raise ValueError("not a loopback address")
        return value

    @field_validator("server_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")) or len(value) <= len("https://"):
            raise ValueError("not an http(s) URL")
        try:
            # yarl (aiohttp's URL type) raises on a port that is not an integer from 0 to 65535;
            # checked here so that a bad port fails at load time, not in the first request.
            url = yarl.URL(value)
            url.port  # noqa: B018 -- the parse is the check
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        if not url.host:
            raise ValueError("no host")
        return value.rstrip("/")

    def masked(self) -> dict[str, Any]:
        """The settings as JSON-ready data for ``roundtabled config``; the password is masked
        (``"********"``, or ``None`` when unset)."""
        data = self.model_dump(mode="json")
        data["server_password"] = _MASK if self.server_password is not None else None
        return data


# What each field accepts, in words (used in error messages), and its value kind.
_ALLOWED: dict[str, str] = {
    "server_url": "an http:// or https:// URL such as http://127.0.0.1:4096",
    "server_username": "a string",
    "server_password": "a string",
    "control_host": "a loopback address (127.0.0.1, ::1, localhost) or unix:/absolute/path",
    "control_port": "an integer port from 0 to 65535 (0 = pick a free port)",
    "token_file": "a file path",
    "key_file": "a file path",
    "state_dir": "a directory path",
    "directories": "a list of directory paths (comma-separated in the environment)",
    "turn_timeout": "a number of seconds from 1 to 86400",
    "loop_threshold": "a number greater than 0 and at most 1",
    "resync_period": "a number of seconds from 0.5 to 3600",
    "permission_policy": "one of reject, allow-once, ask",
    "log_format": "one of text, json",
    "log_level": "one of debug, info, warning, error",
    "usage_footer": "a boolean (true/false, 1/0, yes/no)",
    "hide_past_prompts": "a boolean (true/false, 1/0, yes/no)",
    "progress_toasts": "a boolean (true/false, 1/0, yes/no)",
    "http_timeout": "a number of seconds greater than 0 and at most 3600",
    "max_concurrency": "an integer from 1 to 1024",
    "shutdown_window": "a number of seconds from 0 to 600",
    "budget_tokens": "an integer number of tokens from 1 to 1000000000",
    "budget_usd": "a number of US dollars greater than 0 and at most 1000000",
    "budget_seconds": "a number of seconds greater than 0 and at most 604800",
    "presets": "[presets.NAME] tables in the config file (not an environment variable or flag)",
}

Kind = Literal["str", "int", "float", "bool", "list", "path", "enum", "presets"]
_KINDS: dict[str, Kind] = {
    "server_url": "str",
    "server_username": "str",
    "server_password": "str",
    "control_host": "str",
    "control_port": "int",
    "token_file": "path",
    "key_file": "path",
    "state_dir": "path",
    "directories": "list",
    "turn_timeout": "float",
    "loop_threshold": "float",
    "resync_period": "float",
    "permission_policy": "enum",
    "log_format": "enum",
    "log_level": "enum",
    "usage_footer": "bool",
    "hide_past_prompts": "bool",
    "progress_toasts": "bool",
    "http_timeout": "float",
    "max_concurrency": "int",
    "shutdown_window": "float",
    "budget_tokens": "int",
    "budget_usd": "float",
    "budget_seconds": "float",
    "presets": "presets",
}
assert set(_KINDS) == set(Settings.model_fields) == set(_ALLOWED)

_SECRET = frozenset({"server_password"})
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


class _Bad(Exception):
    """A value of the wrong kind (converted to :class:`ConfigError` by the caller)."""


def _show(field: str, value: object) -> str:
    return "<hidden>" if field in _SECRET else repr(value)


def _error(field: str, key: str, value: object, detail: str = "") -> ConfigError:
    extra = f" ({detail})" if detail else ""
    return ConfigError(
        key,
        f"invalid configuration: {key} = {_show(field, value)}{extra}; expected {_ALLOWED[field]}",
    )


def _from_string(kind: Kind, raw: str) -> object:
    """Parse an environment/command-line string into a value of ``kind``."""
    text = raw.strip()
    if kind == "presets":
        raise _Bad
    if kind == "bool":
        low = text.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise _Bad
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise _Bad from None
    if kind == "float":
        try:
            number = float(text)
        except ValueError:
            raise _Bad from None
        if not math.isfinite(number):
            raise _Bad
        return number
    if kind == "list":
        return [item.strip() for item in text.split(",") if item.strip()]
    if kind == "enum":
        return text.lower()
    if kind == "path":
        if not text:
            raise _Bad
        return Path(text).expanduser()
    return raw


def _from_toml(kind: Kind, value: object) -> object:
    """Check a TOML value of ``kind``: TOML has typed values, so ``"5"`` is not a number."""
    if isinstance(value, str) and kind in ("int", "float", "bool", "list"):
        raise _Bad
    if kind == "presets":
        if not isinstance(value, dict):
            raise _Bad
        return value  # checked by _presets (it names the key inside the table)
    return _from_object(kind, value)


def _one_of(values: tuple[str, ...]) -> str:
    """``'a' or 'b'`` / ``'a', 'b' or 'c'``: the allowed values of a preset key, from the one
    definition of each in :mod:`roundtabled.core.state`."""
    quoted = [repr(v) for v in values]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


PRESET_KEYS: dict[str, str] = {
    "agents": "a list of agent names in speaking order",
    "rounds": "an integer from 1 to 50",
    "observer": "an agent name (omit for the built-in observer)",
    "until": _one_of(get_args(Until)),
    "budget": "a table with any of tokens, usd, seconds (positive numbers)",
    "opening": _one_of(get_args(Opening)),
    "protocol": _one_of(protocols.NAMES),
    "adaptive_threshold": "a share above 0.5 and at most 1 (adaptive's stop share)",
    "context": _one_of(get_args(ContextMode)),
    "title_prefix": "a string put before the roundtable's title",
    "sides": "a table of seat = side (for, against, neutral, or a one-line brief)",
}
"""Keys of a ``[presets.NAME]`` table and what each accepts."""

# preset key -> request body key (the same checks as a roundtable call)
_PRESET_BODY = {
    "agents": "agents",
    "rounds": "rounds",
    "observer": "observer",
    "until": "until",
    "opening": "opening",
    "protocol": "protocol",
    "adaptive_threshold": "adaptiveThreshold",
    "context": "context",
    "sides": "sides",
}


def _presets(raw: Mapping[str, object], where: str) -> dict[str, PresetSpec]:
    """Check the ``[presets.*]`` tables with the rules of a roundtable call.

    Raises:
        ConfigError: naming ``presets.NAME.key (in FILE)``, the bad value and what is allowed.
    """
    out: dict[str, PresetSpec] = {}
    for name, table in raw.items():
        key = f"presets.{name} (in {where})"
        if not isinstance(table, dict):
            raise ConfigError(
                key, f"invalid configuration: {key} must be a table ([presets.{name}])"
            )
        if not PRESET_NAME_RE.match(name):
            raise ConfigError(
                key,
                f"invalid configuration: preset name {name!r} must be letters, digits, '_', "
                "'-' or '.' (at most 64 characters)",
            )
        unknown = sorted(k for k in table if k not in PRESET_KEYS)
        if unknown:
            bad = f"presets.{name}.{unknown[0]} (in {where})"
            raise ConfigError(
                bad,
                f"invalid configuration: unknown key {bad}; allowed keys: "
                + ", ".join(PRESET_KEYS),
            )
        body: dict[str, object] = {"prompt": "preset check"}
        body.update({_PRESET_BODY[k]: v for k, v in table.items() if k in _PRESET_BODY})
        if "agents" not in body:
            body["preset"] = name  # agents may come from the call
        try:
            req = parse_request(body)
            budget = parse_budget(table.get("budget"))
        except ValidationFailed as exc:
            sub = {v: k for k, v in _PRESET_BODY.items()}.get(exc.field, exc.field)
            bad = f"presets.{name}.{sub} (in {where})"
            allowed = PRESET_KEYS.get(sub.split(".")[0], "")
            detail = str(exc).removeprefix("Error: ")
            raise ConfigError(
                bad, f"invalid configuration: {bad}: {detail}; expected {allowed}"
            ) from None
        prefix = table.get("title_prefix")
        if prefix is not None and (not isinstance(prefix, str) or len(prefix) > 100):
            bad = f"presets.{name}.title_prefix (in {where})"
            raise ConfigError(
                bad,
                f"invalid configuration: {bad} = {prefix!r}; expected a string of at most "
                "100 characters",
            )
        out[name] = PresetSpec(
            agents=req.agents if "agents" in table else None,
            rounds=req.rounds if "rounds" in table else None,
            observer=req.observer,
            until=req.until,
            budget=budget,
            opening=req.opening,
            context=req.context,
            title_prefix=prefix,
            sides=req.sides,
            protocol=req.protocol,
            adaptive_threshold=req.adaptive_threshold,
        )
    return out


def _from_object(kind: Kind, value: object) -> object:
    """Check a command-line value of ``kind``; strings are parsed like environment values, other
    values must already have the right type (no silent conversions, e.g. ``True`` is no number)."""
    if isinstance(value, str) and kind in ("int", "float", "bool", "list", "enum", "path"):
        return _from_string(kind, value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
    elif kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif kind == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise _Bad
            return float(value)
    elif kind == "list":
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return list(value)
    elif kind == "path":
        if isinstance(value, Path):
            return value.expanduser()
    elif kind == "str" and isinstance(value, str):
        return value
    raise _Bad


def _read_toml(path: Path, explicit: bool) -> dict[str, Any]:
    label = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if explicit:
            msg = f"invalid configuration: config file {label} does not exist"
            raise ConfigError(label, msg) from None
        return {}
    except OSError as exc:
        raise ConfigError(label, f"invalid configuration: cannot read {label}: {exc}") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(label, f"invalid configuration: {label} is not UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(label, f"invalid configuration: {label} is not TOML: {exc}") from None


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


OTHER_ENV = frozenset(
    {"CONFIG", "FAULT", "URL", "UNIT", "TEMPLATE", "DEMO_MODEL", "DEMO_BASE_URL", "SLOW"}
    | {"EVAL_BASE_URL", "EVAL_MODEL"}
    | {"TEST_WORKERS", "TEST_OPENCODE_MAJOR", "OPENCODE_BIN", "OPENCODE2_BIN", "OPENCODE_VERSION"}
)
"""``ROUNDTABLED_*`` variables read elsewhere (config file, tests' crash points, the tool shim,
the demo, the unit template, and the test suite and its scripts: ``scripts/test``'s workers and
OpenCode release and major, the harness's binaries), not settings fields."""
DOCUMENTED_OTHER_ENV = frozenset({"CONFIG", "URL", "DEMO_MODEL"})
"""Those of ``OTHER_ENV`` the README documents for users (the others are the test suite's)."""


def unknown_environment(env: Mapping[str, str] | None = None) -> list[str]:
    """One warning per ``ROUNDTABLED_*`` variable that names no setting (a typo such as
    ``ROUNDTABLED_TURN_TIMOUT`` would otherwise be ignored silently), with the closest known
    name when there is one. Empty when all are known."""
    env = os.environ if env is None else env
    known = {ENV_PREFIX + f.upper() for f in _KINDS} | {ENV_PREFIX + o for o in OTHER_ENV}
    # Only documented names are suggested (the settings and DOCUMENTED_OTHER_ENV), never the
    # test suite's own variables; the similarity is that of the part after the prefix (the
    # shared ``ROUNDTABLED_`` would make every name look close to every other).
    suggest = sorted(
        [f.upper() for f in _KINDS] + sorted(DOCUMENTED_OTHER_ENV), key=lambda n: (len(n), n)
    )
    out: list[str] = []
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX) or var in known:
            continue
        close = difflib.get_close_matches(var[len(ENV_PREFIX) :], suggest, n=1, cutoff=0.75)
        hint = (
            f"; did you mean {ENV_PREFIX}{close[0]}?"
            if close
            else "; `roundtabled config` lists the settings (each is ROUNDTABLED_ + its key in "
            "capitals)"
        )
        out.append(f"warning: {var} is not a roundtabled setting and is ignored{hint}")
    return out


def load_settings(
    cli: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Build the settings from defaults, the TOML file, the environment and CLI overrides.

    Args:
        cli: field name → value from the command line; ``None`` values are ignored. Strings are
            parsed like environment values.
        env: the environment (default: ``os.environ``); also used for the XDG directories and
            ``ROUNDTABLED_CONFIG``.
        config_file: the TOML file; default :func:`default_config_file`. An explicit file (this
            argument or ``ROUNDTABLED_CONFIG``) must exist; the default one may be missing.

    Raises:
        ConfigError: one message naming the key as written in its source, the bad value and what
            is allowed.
    """
    env = os.environ if env is None else env
    explicit = config_file is not None or bool(env.get(ENV_PREFIX + "CONFIG"))
    path = config_file if config_file is not None else default_config_file(env)

    values: dict[str, object] = {
        "token_file": xdg_config_home(env) / "roundtabled" / "token",
        "key_file": xdg_config_home(env) / "roundtabled" / "signing-key",
        "state_dir": xdg_state_home(env) / "roundtabled",
    }
    keys: dict[str, str] = {}  # field -> key as written in the source that set it
    raw_values: dict[str, object] = {}

    def put(field: str, key: str, raw: object, parse: Any) -> None:
        try:
            values[field] = parse(_KINDS[field], raw)
        except _Bad:
            raise _error(field, key, raw) from None
        keys[field] = key
        raw_values[field] = raw

    for name, value in _read_toml(path, explicit).items():
        key = f"{name} (in {path})"
        if name not in _KINDS:
            allowed = ", ".join(sorted(_KINDS))
            raise ConfigError(
                key, f"invalid configuration: unknown key {key}; allowed keys: {allowed}"
            )
        put(name, key, value, _from_toml)
        if name == "presets":
            values["presets"] = _presets(values["presets"], str(path))  # type: ignore[arg-type]

    for var, field in (
        ("OPENCODE_SERVER_USERNAME", "server_username"),
        ("OPENCODE_SERVER_PASSWORD", "server_password"),
    ):
        if env.get(var):
            put(field, var, env[var], _from_string)
    for field in _KINDS:
        var = ENV_PREFIX + field.upper()
        if var in env:
            put(field, var, env[var], _from_string)

    for field, value in (cli or {}).items():
        if value is None:
            continue
        if field not in _KINDS:
            raise ConfigError(_flag(field), f"invalid configuration: unknown option {_flag(field)}")
        put(field, _flag(field), value, _from_object)

    if values.get("server_password") == "":
        values["server_password"] = None
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        if field not in _KINDS:  # not expected: every field is known
            raise ConfigError(field, f"invalid configuration: {first['msg']}") from None
        key = keys.get(field, field)
        raw = raw_values.get(field, values.get(field))
        detail = ""
        if first["type"] == "value_error":
            detail = first["msg"].removeprefix("Value error, ")
        raise _error(field, key, raw, detail) from None
