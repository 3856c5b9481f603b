"""The code-reading task family of ``roundtabled eval`` (docs/eval.md, "Code reading"): small
Python programs (loops, slicing, dict and string operations) and the question "what does this
print?".

Pure: a seed gives a program's text and nothing else. The answer is what the program prints,
taken by running it once when the set is generated (:mod:`roundtabled.eval.code`); nothing here
runs it. Every program uses only built-ins (no import, no file, no input), ends with one
``print`` of one line, and iterates no set (string hashing is randomised per process, so a set's
order could differ between the run that records the answer and any other).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

WORDS = (
    "apple", "pear", "fig", "kiwi", "plum", "lime", "date", "melon",
    "grape", "cherry", "mango", "peach", "lemon", "berry", "olive",
)  # fmt: skip
"""The words string and dict programs use: lowercase letters only, so that no output holds
punctuation an answer line would lose at its ends."""


def _loop(rng: random.Random) -> str:
    start, n, k, m, j = (
        rng.randint(0, 9),
        rng.randint(3, 9),
        rng.randint(2, 4),
        rng.randint(1, 5),
        rng.randint(1, 4),
    )
    op = rng.choice(["+=", "-=", "*="]) if k > 2 else "+="
    return (
        f"total = {start}\n"
        f"for i in range({n}):\n"
        f"    if i % {k} == 0:\n"
        f"        total {op} i + {m}\n"
        f"    else:\n"
        f"        total -= {j}\n"
        f"print(total)\n"
    )


def _slicing(rng: random.Random) -> str:
    xs = [rng.randint(0, 20) for _ in range(rng.randint(6, 10))]
    a, b = sorted(rng.sample(range(len(xs) + 1), 2))
    step = rng.choice([1, 2, 3])
    c = rng.randint(1, 3)
    tail = rng.choice([f"xs[-{c}:]", f"xs[:{c}]", f"xs[::{c + 1}]"])
    return f"xs = {xs}\nys = xs[{a}:{b}:{step}]\nys = ys[::-1] + {tail}\nprint(ys)\n"


def _dict(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 7))]
    key = rng.choice(["w[0]", "len(w)", "w[-1]"])
    value = rng.choice(["len(w)", "1", "w.count('e') + 1"])
    show = rng.choice(
        [
            "print(sorted(counts.items()))",
            "print(max(counts, key=lambda k: (counts[k], str(k))))",
            "print(sum(counts.values()), len(counts))",
        ]
    )
    return (
        f"text = {' '.join(words)!r}\n"
        f"counts = {{}}\n"
        f"for w in text.split():\n"
        f"    k = {key}\n"
        f"    counts[k] = counts.get(k, 0) + {value}\n"
        f"{show}\n"
    )


def _string(rng: random.Random) -> str:
    a, b = rng.sample(WORDS, 2)
    i, j = sorted(rng.sample(range(1, 6), 2))
    n = rng.randint(2, 3)
    expr = rng.choice(
        [
            f"s[{i}:{j}] * {n} + t[::-1]",
            f"s.upper()[::2] + t[{i}:]",
            f"(s + t)[{i}::{n}]",
            f"t.replace(t[0], s[-1]) + str(len(s) * {n})",
        ]
    )
    return f"s = {a!r}\nt = {b!r}\nr = {expr}\nprint(r, len(r))\n"


def _grid(rng: random.Random) -> str:
    rows, cols, mod = rng.randint(2, 4), rng.randint(2, 5), rng.randint(2, 3)
    return (
        f"grid = [[i * j + {rng.randint(0, 3)} for j in range({cols})] for i in range({rows})]\n"
        f"sums = [sum(row) for row in grid]\n"
        f"print([s for s in sums if s % {mod} == 0], sums[-1])\n"
    )


def _easy_loop(rng: random.Random) -> str:
    start, n, step = rng.randint(0, 9), rng.randint(2, 5), rng.randint(1, 4)
    return f"total = {start}\nfor i in range({n}):\n    total += {step}\nprint(total)\n"


def _easy_slicing(rng: random.Random) -> str:
    xs = [rng.randint(0, 9) for _ in range(rng.randint(4, 6))]
    a = rng.randint(0, 2)
    expr = rng.choice([f"xs[{a}:{a + 2}]", "xs[-2:]", "xs[::-1]", f"xs[{a}] + xs[-1]"])
    return f"xs = {xs}\nprint({expr})\n"


def _easy_dict(rng: random.Random) -> str:
    a, b = rng.sample(WORDS, 2)
    x, y, z = rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 5)
    expr = rng.choice([f"d[{a!r}] + d[{b!r}]", "len(d)", f"d[{a!r}] * {z}"])
    return f"d = {{{a!r}: {x}, {b!r}: {y}}}\nprint({expr})\n"


def _easy_string(rng: random.Random) -> str:
    w = rng.choice(WORDS)
    n = rng.randint(1, 3)
    expr = rng.choice(["w.upper()", f"w[:{n}]", "len(w)", f"w[{n}]", "w[::-1]"])
    return f"w = {w!r}\nprint({expr})\n"


FAMILIES: dict[str, Callable[[random.Random], str]] = {
    "loop": _loop,
    "slicing": _slicing,
    "dict": _dict,
    "string": _string,
    "grid": _grid,
}
"""The program shapes of the ``medium`` level, chosen per seed."""

EASY_FAMILIES: dict[str, Callable[[random.Random], str]] = {
    "loop": _easy_loop,
    "slicing": _easy_slicing,
    "dict": _easy_dict,
    "string": _easy_string,
}
"""The program shapes of the ``easy`` level: two to four lines, one operation on literals — for
a small model that reads no ``medium`` program right (bench/README.md, "eval")."""

LEVELS: dict[str, dict[str, Callable[[random.Random], str]]] = {
    "easy": EASY_FAMILIES,
    "medium": FAMILIES,
}
"""The levels of ``--tasks code`` (``--level``)."""


def program(seed: str, level: str = "medium") -> str:
    """The program of ``seed`` (any string; the same seed and level give the same text) at
    ``level`` (a key of :data:`LEVELS`): a few lines of Python that print one line.

    Raises:
        KeyError: ``level`` is not a key of :data:`LEVELS`.
    """
    families = LEVELS[level]
    # medium keeps the seed's original stream, so its sets are the ones generated before levels
    rng = random.Random(f"code:{seed}" if level == "medium" else f"code-{level}:{seed}")
    family = rng.choice(sorted(families))
    return families[family](rng)


def question_text(source: str) -> str:
    """The question a seat reads for ``source``: the program in a fenced block and the ask."""
    return (
        "What does this Python program print?\n\n"
        f"```python\n{source.rstrip()}\n```\n\n"
        "Give its output exactly as printed (it is one line)."
    )


def output_form(text: str | None) -> str | None:
    """The form printed outputs are compared in (docs/eval.md, "Code reading"): surrounding
    whitespace and blank lines dropped and each line's trailing whitespace dropped; everything
    else — case, punctuation, spaces inside a line — must match exactly. ``None`` or an empty
    output → ``None`` (no answer)."""
    if text is None:
        return None
    lines = [line.rstrip() for line in text.strip().splitlines()]
    joined = "\n".join(lines)
    return joined or None


def one_line(output: str) -> bool:
    """True when ``output`` (what a program printed) is one non-empty line: what an answer line
    can state."""
    form = output_form(output)
    return form is not None and "\n" not in form and re.search(r"\S", form) is not None
