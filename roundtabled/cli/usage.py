"""Usage errors of the command line in one line, the way git reports them.

A usage error (unknown flag, a value of the wrong type or outside its choices, a missing
argument) prints exactly one line on stderr and exits 2 (the project's rule for bad input):
``Error:``, the flag or argument as the user typed it, what it takes, a ``did you mean`` where a
close spelling exists (:func:`close_spelling`), and where the full usage is (``see roundtabled
start --help``); the usage text itself is not printed, so the line that matters is not buried
under it. An unknown flag that another command takes says which (``extend --agents``: a flag of
start and eval), rather than suggesting an unrelated flag of this command.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

EXIT_USAGE = 2
"""Exit code of a usage error (the same as ``roundtabled.cli.client.EXIT_USAGE``)."""

_TYPE_WORDS = {"int": "a whole number", "float": "a number"}
"""What a value of a flag's type is called in the message (argparse names the Python type)."""

_INVALID_VALUE = re.compile(r"argument (?P<arg>[^:]+): invalid (?P<type>\w+) value: (?P<v>.*)$")
_INVALID_CHOICE = re.compile(
    r"argument (?P<arg>[^:]+): invalid choice: (?P<v>.*?) \(choose from (?P<choices>.*)\)$"
)
_REQUIRED = re.compile(r"the following arguments are required: (?P<args>.*)$")
_EXPECTED = re.compile(r"argument (?P<arg>[^:]+): expected (?P<what>.*)$")


def _unquote(text: str) -> str:
    return text.strip().strip("'\"")


def _choices(text: str) -> list[str]:
    return [_unquote(c) for c in text.split(",") if _unquote(c)]


def _or_list(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _argument_name(arg: str) -> str:
    """``--rounds/-r`` style names as argparse gives them → the long flag; a positional's
    metavar as typed in the usage (``prompt`` → ``PROMPT``, ``COMMAND`` unchanged)."""
    names = arg.split("/")
    long = [n for n in names if n.startswith("--")]
    if long:
        return long[0]
    if names[0].startswith("-"):
        return names[0]
    return names[0].upper()


SPELLING_CUTOFF = 0.75
"""How alike (:class:`difflib.SequenceMatcher` ratio, dashes left out) a typo and the word it
suggests must be. difflib's default of 0.6, on the flags with their dashes, suggested
``--budget-usd`` for ``extend --agents``, ``--json`` for ``list --round`` and ``--count`` for
``eval --round``."""


def close_spelling(typed: str, words: Sequence[str]) -> str | None:
    """The one of ``words`` that ``typed`` most likely misspells, or ``None``.

    Flags are compared without their dashes (the shared ``--`` made unrelated flags look alike).
    The one word that ``typed`` begins, for three letters or more, is it (``stat``: ``status``).
    Otherwise a close spelling keeps the first letter (a typo swaps, drops or doubles letters
    further on: ``--agnets``, ``--turn-timout``; ``round`` is not ``count``) and is
    :data:`SPELLING_CUTOFF` alike. Last, a flag that is one dash-separated part of exactly one
    longer flag (``--port``: ``--control-port``).

    >>> close_spelling("--turn-timout", ["--turn-timeout", "--title"])
    '--turn-timeout'
    >>> close_spelling("--round", ["--json", "--limit"]) is None
    True
    """
    bare = {w.lstrip("-"): w for w in words}
    name = typed.lstrip("-")
    if not name:
        return None
    starts = [w for b, w in bare.items() if b.startswith(name)]
    if len(starts) == 1 and len(name) >= 3:  # `-r` is no typo of `--rounds`
        return starts[0]
    alike = [b for b in bare if b[:1] == name[:1]]
    close = difflib.get_close_matches(name, alike, n=1, cutoff=SPELLING_CUTOFF)
    if close:
        return bare[close[0]]
    parts = [w for b, w in bare.items() if name in b.split("-")[1:]]
    return parts[0] if len(parts) == 1 else None


def one_line(message: str) -> str:
    """The user's words for argparse's ``message``, without the trailing hint.

    >>> one_line("argument --rounds: invalid int value: '2.5'")
    "--rounds must be a whole number, not '2.5'"
    """
    m = _INVALID_VALUE.match(message)
    if m:
        what = _TYPE_WORDS.get(m["type"], f"a {m['type']}")
        return f"{_argument_name(m['arg'])} must be {what}, not {m['v']}"
    m = _INVALID_CHOICE.match(message)
    if m:
        choices, value = _choices(m["choices"]), _unquote(m["v"])
        name = _argument_name(m["arg"])
        if name == "COMMAND":
            text = f"{value!r} is not a roundtabled command"
        else:
            text = f"{name} must be {_or_list(choices)}, not {value!r}"
        close = close_spelling(value, choices)
        return text + (f"; did you mean {close}?" if close else "")
    m = _REQUIRED.match(message)
    if m:
        missing = [_argument_name(a.strip()) for a in m["args"].split(",")]
        return f"missing {_or_list(missing).replace(' or ', ' and ')}"
    m = _EXPECTED.match(message)
    if m:
        return f"{_argument_name(m['arg'])} needs a value"
    m = re.match(r"argument (?P<a>[^:]+): not allowed with argument (?P<b>.*)$", message)
    if m:
        return f"{_argument_name(m['a'])} and {_argument_name(m['b'])} cannot be given together"
    return message


class UsageParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose usage errors are one line (module docstring).

    Sub-parsers made by ``add_subparsers`` are of this class too (argparse makes them of the
    parent's class), so every command reports its errors this way. ``commands``: every command's
    parser by name (set by :func:`roundtabled.cli.parser.build_parser`), for naming the commands
    that take a flag this one does not.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> NoReturn:
        """Print ``Error: <what> ; see <prog> --help`` on stderr and exit 2.

        Raises:
            SystemExit: always, code 2.
        """
        sys.stderr.write(f"Error: {one_line(message)} (see {self.prog} --help)\n")
        sys.exit(EXIT_USAGE)

    def unknown_arguments(self, extras: Sequence[str]) -> NoReturn:
        """Report ``extras`` (arguments no parser took): the unknown flags, and for the first
        with a close spelling among this command's long options, ``did you mean``; failing
        that, the other commands that take it (:meth:`taken_by`).

        Raises:
            SystemExit: always, code 2.
        """
        flags = [x for x in extras if x.startswith("-")]
        if not flags:
            self.error(f"unexpected argument {' '.join(extras)!r}")
        message = ("unknown flag " if len(flags) == 1 else "unknown flags ") + " ".join(flags)
        for flag in flags:
            close = close_spelling(flag.split("=", 1)[0], _long_options(self))
            if close:
                message += f"; did you mean {close}?"
                break
        else:
            for flag in flags:
                meant, where = self.taken_by(flag.split("=", 1)[0])
                if where:
                    message += f"; {meant} is a flag of {_or_list(where).replace(' or ', ' and ')}"
                    break
        self.error(message)

    def taken_by(self, flag: str) -> tuple[str, list[str]]:
        """The other commands that take ``flag`` (as typed, or as argparse would complete it
        there): the flag's full spelling and those commands' names (empty: none)."""
        found: dict[str, list[str]] = {}
        for name, parser in self.commands.items():
            if parser is self:
                continue
            options = _long_options(parser)
            starts = [o for o in options if o.startswith(flag)]
            full = flag if flag in options else starts[0] if len(starts) == 1 else None
            if full is not None:
                found.setdefault(full, []).append(name)
        if not found:
            return flag, []
        # The exact flag first; else the completion most commands share.
        full = flag if flag in found else max(found, key=lambda f: len(found[f]))
        return full, found[full]


def _long_options(parser: argparse.ArgumentParser) -> list[str]:
    return [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
