"""Settings: precedence (defaults < TOML < env < CLI), every error path, masking."""

from __future__ import annotations

from pathlib import Path

import pytest

from roundtabled.core.state import PermissionPolicy
from roundtabled.engine.settings import Settings as EngineSettings
from roundtabled.errors import RoundtableError
from roundtabled.service import config as cfg
from roundtabled.service.config import (
    ConfigError,
    Settings,
    default_config_file,
    load_settings,
    xdg_config_home,
    xdg_state_home,
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home")}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


# ── defaults and paths ──────────────────────────────────────────────────────────────────────────


def test_defaults(env: dict[str, str], tmp_path: Path) -> None:
    s = load_settings(env=env)
    home = tmp_path / "home"
    assert s.server_url == "http://127.0.0.1:4096"
    assert s.server_username == "opencode"
    assert s.server_password is None
    assert s.control_host == "127.0.0.1"
    assert s.control_port == 4747
    assert s.token_file == home / ".config/roundtabled/token"
    assert s.key_file == home / ".config/roundtabled/signing-key"
    assert s.state_dir == home / ".local/state/roundtabled"
    assert s.directories == []
    assert s.turn_timeout == 300
    assert s.loop_threshold == 0.85
    assert s.resync_period == 15
    assert s.permission_policy is PermissionPolicy.REJECT
    assert (s.log_format, s.log_level) == ("text", "info")
    assert s.usage_footer is True and s.hide_past_prompts is True
    assert (s.http_timeout, s.max_concurrency, s.shutdown_window) == (30, 16, 8)


def test_xdg_helpers(tmp_path: Path) -> None:
    env = {"HOME": "/h", "XDG_CONFIG_HOME": "/cfg", "XDG_STATE_HOME": "/st"}
    assert xdg_config_home(env) == Path("/cfg")
    assert xdg_state_home(env) == Path("/st")
    assert default_config_file(env) == Path("/cfg/roundtabled/config.toml")
    relative = {"HOME": "/h", "XDG_CONFIG_HOME": "rel", "XDG_STATE_HOME": ""}
    assert xdg_config_home(relative) == Path("/h/.config")  # relative values are ignored
    assert xdg_state_home(relative) == Path("/h/.local/state")
    assert default_config_file({"ROUNDTABLED_CONFIG": "/x.toml"}) == Path("/x.toml")
    s = load_settings(env={**env, "XDG_CONFIG_HOME": str(tmp_path)})
    assert s.token_file == tmp_path / "roundtabled/token"
    assert s.state_dir == Path("/st/roundtabled")


def test_settings_is_frozen() -> None:
    s = Settings()
    with pytest.raises(ValueError):
        s.turn_timeout = 5  # type: ignore[misc]


def test_the_engine_gets_the_configuration_and_the_same_defaults(env: dict[str, str]) -> None:
    """One source: the defaults of the configuration are the engine's and the roundtables'."""
    s = load_settings(env=env)
    assert s.engine_settings() == EngineSettings(state_dir=s.state_dir)
    tuned = load_settings(
        {"turn_timeout": "42", "resync_period": "2", "progress_toasts": "false"}, env=env
    ).engine_settings()
    assert tuned.roundtable.turn_timeout == 42
    assert (tuned.resync_period, tuned.progress_toasts) == (2, False)


# ── precedence ──────────────────────────────────────────────────────────────────────────────────


def test_precedence(env: dict[str, str], tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'turn_timeout = 10\nloop_threshold = 0.5\nlog_level = "debug"\n'
        'directories = ["/a", "/b"]\ncontrol_port = 5000\n',
    )
    env = {**env, "ROUNDTABLED_TURN_TIMEOUT": "20", "ROUNDTABLED_LOOP_THRESHOLD": "0.6"}
    s = load_settings(cli={"turn_timeout": 30, "loop_threshold": None}, env=env, config_file=path)
    assert s.turn_timeout == 30  # CLI beats env beats TOML
    assert s.loop_threshold == 0.6  # None on the CLI is "not given"
    assert s.log_level == "debug"  # TOML beats defaults
    assert s.directories == ["/a", "/b"]
    assert s.control_port == 5000


def test_default_config_file_is_found_and_may_be_missing(env: dict[str, str]) -> None:
    assert load_settings(env=env).turn_timeout == 300  # no file: defaults
    path = Path(env["HOME"]) / ".config/roundtabled/config.toml"
    path.parent.mkdir(parents=True)
    path.write_text("turn_timeout = 42\n")
    assert load_settings(env=env).turn_timeout == 42


def test_roundtabled_config_env_names_the_file(env: dict[str, str], tmp_path: Path) -> None:
    path = write(tmp_path, "resync_period = 2.5\n")
    assert load_settings(env={**env, "ROUNDTABLED_CONFIG": str(path)}).resync_period == 2.5


def test_env_parsing(env: dict[str, str]) -> None:
    s = load_settings(
        env={
            **env,
            "ROUNDTABLED_TURN_TIMEOUT": "5",
            "ROUNDTABLED_DIRECTORIES": " /p1, /p2 ,,",
            "ROUNDTABLED_USAGE_FOOTER": "no",
            "ROUNDTABLED_HIDE_PAST_PROMPTS": "0",
            "ROUNDTABLED_PERMISSION_POLICY": "Allow-Once",
            "ROUNDTABLED_LOG_FORMAT": "JSON",
            "ROUNDTABLED_CONTROL_HOST": "unix:/run/roundtabled.sock",
            "ROUNDTABLED_CONTROL_PORT": "0",
            "ROUNDTABLED_TOKEN_FILE": "/t/token",
            "ROUNDTABLED_SERVER_URL": "http://127.0.0.1:9999/",
            "ROUNDTABLED_UNKNOWN_THING": "ignored",
        }
    )
    assert s.turn_timeout == 5
    assert s.directories == ["/p1", "/p2"]
    assert s.usage_footer is False and s.hide_past_prompts is False
    assert s.permission_policy is PermissionPolicy.ALLOW_ONCE
    assert s.log_format == "json"
    assert s.control_host == "unix:/run/roundtabled.sock"
    assert s.control_port == 0
    assert s.token_file == Path("/t/token")
    assert s.server_url == "http://127.0.0.1:9999"


@pytest.mark.parametrize("value", ["true", "1", "yes", "YES", "on"])
def test_env_true_values(env: dict[str, str], value: str) -> None:
    assert load_settings(env={**env, "ROUNDTABLED_USAGE_FOOTER": value}).usage_footer is True


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"])
def test_loopback_hosts(env: dict[str, str], host: str) -> None:
    assert load_settings(cli={"control_host": host}, env=env).control_host == host


def test_password_sources(env: dict[str, str], tmp_path: Path) -> None:
    assert load_settings(env={**env, "OPENCODE_SERVER_PASSWORD": ""}).server_password is None
    s = load_settings(env={**env, "OPENCODE_SERVER_PASSWORD": "p1"})
    assert s.server_password is not None and s.server_password.get_secret_value() == "p1"
    s = load_settings(
        env={**env, "OPENCODE_SERVER_PASSWORD": "p1", "ROUNDTABLED_SERVER_PASSWORD": "p2"}
    )
    assert s.server_password is not None and s.server_password.get_secret_value() == "p2"
    path = write(tmp_path, 'server_password = "from-file"\nserver_username = "u"\n')
    s = load_settings(env={**env, "OPENCODE_SERVER_USERNAME": "v"}, config_file=path)
    assert s.server_password is not None
    assert s.server_password.get_secret_value() == "from-file"
    assert s.server_username == "v"
    s = load_settings(cli={"server_password": "p3"}, env=env)
    assert s.server_password is not None and s.server_password.get_secret_value() == "p3"


def test_cli_strings_are_parsed(env: dict[str, str]) -> None:
    s = load_settings(
        cli={"turn_timeout": "7", "usage_footer": "false", "state_dir": "/s"}, env=env
    )
    assert (s.turn_timeout, s.usage_footer, s.state_dir) == (7, False, Path("/s"))


# ── masking ─────────────────────────────────────────────────────────────────────────────────────


def test_masked(env: dict[str, str]) -> None:
    masked = load_settings(env={**env, "OPENCODE_SERVER_PASSWORD": "hunter2"}).masked()
    assert masked["server_password"] == "********"
    assert "hunter2" not in repr(masked)
    assert masked["turn_timeout"] == 300
    assert masked["permission_policy"] == "reject"
    assert isinstance(masked["token_file"], str)
    assert load_settings(env=env).masked()["server_password"] is None


# ── errors: one message naming the key, the value and what is allowed ──────────────────────────


def _error(**kw: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_settings(**kw)  # type: ignore[arg-type]
    assert isinstance(info.value, RoundtableError)
    assert "Traceback" not in str(info.value) and "pydantic" not in str(info.value)
    return info.value


@pytest.mark.parametrize(
    ("var", "value", "allowed"),
    [
        ("ROUNDTABLED_TURN_TIMEOUT", "abc", "1 to 86400"),
        ("ROUNDTABLED_TURN_TIMEOUT", "0", "1 to 86400"),
        ("ROUNDTABLED_TURN_TIMEOUT", "100000", "1 to 86400"),
        ("ROUNDTABLED_TURN_TIMEOUT", "nan", "1 to 86400"),
        ("ROUNDTABLED_LOOP_THRESHOLD", "0", "greater than 0"),
        ("ROUNDTABLED_LOOP_THRESHOLD", "1.5", "at most 1"),
        ("ROUNDTABLED_RESYNC_PERIOD", "0.1", "0.5 to 3600"),
        ("ROUNDTABLED_CONTROL_PORT", "70000", "0 to 65535"),
        ("ROUNDTABLED_CONTROL_PORT", "1.5", "0 to 65535"),
        ("ROUNDTABLED_CONTROL_HOST", "0.0.0.0", "loopback"),
        ("ROUNDTABLED_CONTROL_HOST", "example.com", "loopback"),
        ("ROUNDTABLED_CONTROL_HOST", "unix:relative.sock", "unix:/absolute/path"),
        ("ROUNDTABLED_USAGE_FOOTER", "maybe", "boolean"),
        ("ROUNDTABLED_PERMISSION_POLICY", "always", "reject, allow-once, ask"),
        ("ROUNDTABLED_LOG_FORMAT", "xml", "text, json"),
        ("ROUNDTABLED_LOG_LEVEL", "trace", "debug, info, warning, error"),
        ("ROUNDTABLED_MAX_CONCURRENCY", "0", "1 to 1024"),
        ("ROUNDTABLED_HTTP_TIMEOUT", "0", "greater than 0"),
        ("ROUNDTABLED_SHUTDOWN_WINDOW", "-1", "0 to 600"),
        ("ROUNDTABLED_SERVER_URL", "ftp://x", "http"),
        ("ROUNDTABLED_KEY_FILE", "", "path"),
    ],
)
def test_env_errors(env: dict[str, str], var: str, value: str, allowed: str) -> None:
    err = _error(env={**env, var: value})
    assert err.key == var
    assert var in str(err)
    assert repr(value) in str(err)
    assert allowed in str(err)


@pytest.mark.parametrize(
    ("toml", "key", "shown", "allowed"),
    [
        ('turn_timeout = "abc"', "turn_timeout", "'abc'", "1 to 86400"),
        ("turn_timeout = true", "turn_timeout", "True", "1 to 86400"),
        ('turn_timeout = "5"', "turn_timeout", "'5'", "1 to 86400"),
        ('usage_footer = "yes"', "usage_footer", "'yes'", "boolean"),
        ("turn_timeout = [1]", "turn_timeout", "[1]", "1 to 86400"),
        ("control_port = 4747.5", "control_port", "4747.5", "0 to 65535"),
        ("usage_footer = 1", "usage_footer", "1", "boolean"),
        ('directories = "/a"', "directories", "'/a'", "list"),
        ("directories = [1, 2]", "directories", "[1, 2]", "list"),
        ('control_host = "192.168.1.10"', "control_host", "'192.168.1.10'", "loopback"),
        ("server_url = 5", "server_url", "5", "URL"),
        ("loop_threshold = 2", "loop_threshold", "2", "at most 1"),
        ("log_level = {a = 1}", "log_level", "{'a': 1}", "debug"),
    ],
)
def test_toml_errors(
    env: dict[str, str], tmp_path: Path, toml: str, key: str, shown: str, allowed: str
) -> None:
    path = write(tmp_path, toml + "\n")
    err = _error(env=env, config_file=path)
    assert err.key.startswith(key)
    assert str(path) in str(err)
    assert f"{key} (in {path}) = {shown}" in str(err)
    assert allowed in str(err)


def test_toml_unknown_key(env: dict[str, str], tmp_path: Path) -> None:
    path = write(tmp_path, "turn_timout = 5\n")
    err = _error(env=env, config_file=path)
    assert "unknown key turn_timout" in str(err)
    assert "turn_timeout" in str(err)  # the allowed keys are listed


def test_toml_syntax_error(env: dict[str, str], tmp_path: Path) -> None:
    path = write(tmp_path, "turn_timeout = = 5\n")
    err = _error(env=env, config_file=path)
    assert str(path) in str(err) and "not TOML" in str(err) and "line 1" in str(err)


def test_toml_not_utf8(env: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"log_level = '\xff'\n")
    assert "not UTF-8" in str(_error(env=env, config_file=path))


def test_explicit_config_file_must_exist(env: dict[str, str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    assert "does not exist" in str(_error(env=env, config_file=missing))
    err = _error(env={**env, "ROUNDTABLED_CONFIG": str(missing)})
    assert str(missing) in str(err)


def test_unreadable_config_file(env: dict[str, str], tmp_path: Path) -> None:
    assert "cannot read" in str(_error(env=env, config_file=tmp_path))  # a directory


@pytest.mark.parametrize(
    ("cli", "flag", "allowed"),
    [
        ({"turn_timeout": 0}, "--turn-timeout", "1 to 86400"),
        ({"turn_timeout": "soon"}, "--turn-timeout", "1 to 86400"),
        ({"control_host": "10.0.0.1"}, "--control-host", "loopback"),
        ({"control_port": -1}, "--control-port", "0 to 65535"),
        ({"directories": 5}, "--directories", "list"),
        ({"no_such_option": 1}, "--no-such-option", ""),
    ],
)
def test_cli_errors(env: dict[str, str], cli: dict[str, object], flag: str, allowed: str) -> None:
    err = _error(cli=cli, env=env)
    assert err.key == flag
    assert flag in str(err)
    assert allowed in str(err)


def test_password_never_echoed_in_errors(env: dict[str, str], tmp_path: Path) -> None:
    path = write(tmp_path, "server_password = 12345\n")
    err = _error(env=env, config_file=path)
    assert "server_password" in str(err)
    assert "12345" not in str(err)
    assert "<hidden>" in str(err)


def test_unknown_roundtabled_variables_are_warned_about_with_the_closest_name() -> None:
    env = {
        "ROUNDTABLED_TURN_TIMOUT": "5",  # typo
        "ROUNDTABLED_UNKNOWN_THING": "x",
        "ROUNDTABLED_TURN_TIMEOUT": "5",
        "ROUNDTABLED_FAULT": "prompted:1",
        "ROUNDTABLED_SLOW": "1",
        "HOME": "/h",
    }
    warnings = cfg.unknown_environment(env)
    assert len(warnings) == 2
    assert "ROUNDTABLED_TURN_TIMOUT is not a roundtabled setting" in warnings[0]
    assert "did you mean ROUNDTABLED_TURN_TIMEOUT?" in warnings[0]
    assert warnings[1].startswith("warning: ROUNDTABLED_UNKNOWN_THING")
    far = cfg.unknown_environment({"ROUNDTABLED_ZZZZZZZZZZZZZZZZZZZZ": "1"})
    assert "did you mean" not in far[0] and "roundtabled config" in far[0]  # no close match
    assert cfg.unknown_environment({"ROUNDTABLED_LOG_LEVEL": "info"}) == []


# ── presets and default budgets ─────────────────────────────────────────────────────────────────

PRESETS = """
budget_tokens = 50000
budget_seconds = 900
[presets.arch]
agents = ["pm", "dev", "rv"]
rounds = 4
observer = "rv"
until = "converged"
budget = {tokens = 20000, usd = 0.5}
opening = "sequential"
context = "full"
title_prefix = "[arch] "
[presets.quick]
rounds = 1
"""


def test_presets_and_default_budget_are_read(env: dict[str, str], tmp_path: Path) -> None:
    s = load_settings(env=env, config_file=write(tmp_path, PRESETS))
    arch = s.presets["arch"]
    assert arch.agents == ("pm", "dev", "rv") and arch.rounds == 4 and arch.observer == "rv"
    assert (arch.until, arch.opening, arch.context) == ("converged", "sequential", "full")
    assert arch.budget is not None and (arch.budget.tokens, arch.budget.usd) == (20000, 0.5)
    assert arch.title_prefix == "[arch] "
    quick = s.presets["quick"]
    assert quick.agents is None and quick.rounds == 1 and quick.until is None
    budget = s.default_budget()
    assert budget is not None and (budget.tokens, budget.usd, budget.seconds) == (50000, None, 900)
    assert s.masked()["presets"]["arch"]["budget"]["tokens"] == 20000
    assert load_settings(env=env).default_budget() is None


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ("[presets.a]\nseats = ['pm']", "presets.a.seats", "allowed keys: agents, rounds"),
        ("[presets.a]\nrounds = 0", "presets.a.rounds", "from 1 to 50"),
        ("[presets.a]\nuntil = 'forever'", "presets.a.until", "'rounds', 'converged'"),
        ("[presets.a]\nopening = 'parallel'", "presets.a.opening", "'sequential', 'independent'"),
        ("[presets.a]\ncontext = 'some'", "presets.a.context", "'full', 'recent'"),
        ("[presets.a]\nbudget = {tokens = -1}", "presets.a.budget", "budget.tokens must be"),
        ("[presets.a]\nbudget = {coins = 3}", "presets.a.budget", "unknown budget key 'coins'"),
        ("[presets.a]\nagents = 'pm'", "presets.a.agents", "list of agent names"),
        ("[presets.a]\ntitle_prefix = 3", "presets.a.title_prefix", "a string"),
        ("presets = 3", "presets", "[presets.NAME] tables"),
        ("budget_tokens = 0", "budget_tokens", "from 1 to 1000000000"),
        ("budget_usd = -2.0", "budget_usd", "greater than 0"),
    ],
)
def test_preset_errors_name_the_key(
    env: dict[str, str], tmp_path: Path, text: str, key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings(env=env, config_file=write(tmp_path, text))
    assert exc.value.key.startswith(key), exc.value.key
    assert words in str(exc.value)


def test_presets_cannot_come_from_the_environment(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings(env={**env, "ROUNDTABLED_PRESETS": "x"})
    assert exc.value.key == "ROUNDTABLED_PRESETS"
    assert load_settings(env={**env, "ROUNDTABLED_BUDGET_TOKENS": "300"}).budget_tokens == 300


def test_example_presets_load(env: dict[str, str]) -> None:
    example = Path(__file__).parents[2] / "examples" / "config.toml"
    s = load_settings(env=env, config_file=example)
    assert len(s.presets) >= 2
