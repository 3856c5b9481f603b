"""A corpus of closing lines as real models write them, each with its expected stance.

Every case is a reply's end (sometimes the whole reply) as small and large models wrote them in
real debates or as they plausibly would: rephrasings of one stance, markdown bold, trailing
periods, missing or odd confidence, several sentences, the wrong dash, the seat's name as the
label, no line at all, two ``Position:`` lines. Within each family the labels are parsed
(:func:`roundtabled.core.positions.parse_position`) and grouped together
(:func:`roundtabled.core.stances.seat_stances`); two cases must share a stance exactly when they
share an expected id, and a case expected ``None`` must have no stance.
"""

from __future__ import annotations

from itertools import combinations
from typing import NamedTuple

import pytest

from roundtabled.core.positions import parse_position
from roundtabled.core.stances import seat_stances

_ANY = -1.0  # the case does not check the confidence


class Case(NamedTuple):
    text: str
    stance: str | None
    confidence: float | None = _ANY


SEATS = ["pm", "dev", "rv", "Customer", "Architect"]
TOPIC = {
    "payments": "Should we split the payments monolith into services this quarter?",
    "arith": "What is the result of 3*4+0*7?",
    "choice": "Which option is best? A) Postgres B) MongoDB C) SQLite",
    "orm": "Which ORM should we use for the new service?",
}

CORPUS: dict[str, list[Case]] = {
    "payments": [
        # one stance, many phrasings
        Case(
            "We weigh it.\nPosition: modular monolith — keep one deploy unit (confidence 7/10)",
            "mono",
            0.7,
        ),
        Case(
            "Position: Modular monolith first — split once boundaries are clear (confidence 8/10)",
            "mono",
            0.8,
        ),
        Case(
            "Position: a modular monolith, for now — it is cheaper (confidence 6/10)", "mono", 0.6
        ),
        Case(
            "**Position:** Modular Monolith — one deploy, clear modules (confidence: 7/10)",
            "mono",
            0.7,
        ),
        Case(
            "**Position: Modular monolith.** It keeps one deploy unit. Boundaries come first.",
            "mono",
            None,
        ),
        Case("Position: The modular monolith – fewer moving parts (confidence 70%)", "mono", 0.7),
        Case("Position: modular-monolith — it is what the team can run", "mono", None),
        Case("Position: Modular monolith. (confidence 0.8)", "mono", 0.8),
        Case("position: modular monolith - we keep it simple (conf 9/10)", "mono", 0.9),
        Case(
            "> Position: Modular monolith initially — lower risk (confidence seven out of ten)",
            "mono",
            0.7,
        ),
        Case("Position: Go with a modular monolith — least risk this quarter", "mono", None),
        Case("Position: modular monoliths — several modules, one deploy (7/10)", "mono", 0.7),
        Case(
            "Position: Modular monolith for the time being — revisit in Q3 (confidence 6/10)",
            "mono",
            0.6,
        ),
        Case(
            "Position: We should build a modular monolith — no services yet (70% confident)",
            "mono",
            0.7,
        ),
        Case(
            "Position: Modular monolith with clear module boundaries — then extract billing",
            "mono",
            None,
        ),
        Case("Position: __modular monolith__ — same as pm (confidence 8/10)", "mono", 0.8),
        Case(
            "Position: Modular monolith first. Split billing if load demands. (confidence 7)",
            "mono",
            0.7,
        ),
        # two Position lines: the last one counts
        Case(
            "Position: split now — draft\nOn reflection…\n"
            "Position: modular monolith — final (confidence 6/10)",
            "mono",
            0.6,
        ),
        # the opposite stance, rephrased
        Case("Position: split payments now — the team is ready (confidence 8/10)", "split", 0.8),
        Case("Position: Split payments now. The team is ready.", "split", None),
        Case(
            "**Position:** Split the payments now — PCI scope shrinks (confidence: 9/10)",
            "split",
            0.9,
        ),
        Case(
            "Position: split payments immediately — waiting costs more",
            "split-now-immediately",
            None,
        ),
        Case("Position: Split payment now — one service first (confidence 5/10)", "split", 0.5),
        # negations never join their stance
        Case(
            "Position: do not split payments — too risky this quarter (confidence 7/10)",
            "no-split",
            0.7,
        ),
        Case(
            "Position: Don't split payments — not this quarter (confidence 8/10)", "no-split", 0.8
        ),
        Case("Position: Do not split the payments — the risk is high", "no-split", None),
        Case("Position: no split of payments — risk", "no-split-noun", None),
        Case("Position: split payments — eventually", "split-bare", None),
        Case("Position: Split payments. Clear boundaries exist.", "split-bare", None),
        # a different qualifier is a different stance
        Case("Position: split payments later — after the audit (confidence 6/10)", "later", 0.6),
        Case("Position: Split payments later. After the audit.", "later", None),
        # labels that name no stance
        Case("Position: PM — I think we keep the monolith for now (confidence 7/10)", None, 0.7),
        Case("Position: Dev — we should keep it", None, None),
        Case("Position: dev's position — keep it", None, None),
        Case("Position: Customer – customers want stability", None, None),
        Case("Position: Position — keep it", None, None),
        Case("Position: <short label> — <one sentence> (confidence N/10)", None, None),
        Case(
            "Position: Should we split the payments monolith into services this quarter? — yes",
            None,
            None,
        ),
        Case("Position: split the payments monolith into services this quarter — yes", None, None),
        # no line at all
        Case("I think we should keep the monolith and revisit next quarter.", None, None),
        Case("My position is clear: split.", None, None),
        Case("", None, None),
    ],
    "arith": [
        Case("3*4 = 12, 0*7 = 0, so 12.\nPosition: 12 — 12 + 0 (confidence 9/10)", "12", 0.9),
        Case("Position: 12.0 — computed step by step", "12", None),
        Case("Position: **12** — sure (confidence 10/10)", "12", 1.0),
        Case("Position: The answer is 12 — 3*4 is 12", "12", None),
        Case("Step by step: 12 + 0.\nAnswer: 12", "12", None),
        Case("So the result is \\boxed{12}.", "12", None),
        Case("\\boxed{12}", "12", None),
        Case("Final answer: 12.", "12", None),
        Case("Position: x = 12 — done (70%)", "12", 0.7),
        Case("Position: 12. (confidence: 0.6)", "12", 0.6),
        Case("Position: 112 — I added wrong (confidence 5/10)", "112", 0.5),
        Case("Answer: 112", "112", None),
        Case("Position: -12 — sign error", "-12", None),
        Case("Position: 21 — digits swapped", "21", None),
        Case("Position: 12.5 — rounding", "12.5", None),
        Case("Position: 1,200 — thousands", "1200", None),
        Case("Answer: 1200", "1200", None),
        Case("Position: Dev — 12", None, None),
        Case("I cannot compute this.", None, None),
    ],
    "choice": [
        Case("Position: A — Postgres is the safe default (confidence 8/10)", "A", 0.8),
        Case("Position: Option A — Postgres", "A", None),
        Case("Position: (A) — relational", "A", None),
        Case("Position: option a. — Postgres", "A", None),
        Case("Position: B — documents fit", "B", None),
        Case("Position: Option B — MongoDB (confidence 4/10)", "B", 0.4),
        Case("Position: C — SQLite is enough", "C", None),
        Case("Answer: C", "C", None),
    ],
    "orm": [
        Case("Position: SQLAlchemy — mature (confidence 8/10)", "sqla", 0.8),
        Case("Position: **SQLAlchemy** — the team knows it", "sqla", None),
        Case("Position: sqlalchemy. — yes", "sqla", None),
        Case("Position: Use SQLAlchemy — mature", "sqla-use", None),
        Case("Position: raw SQL — no ORM at all (confidence 6/10)", "raw", 0.6),
        Case("Position: Raw SQL. Simpler to debug.", "raw", None),
        Case("Position: no ORM — raw SQL", "no-orm", None),
        Case("Position: ORM — any", "orm", None),
        Case("Position: Architect — SQLAlchemy", None, None),
        Case("Position: my position — SQLAlchemy", None, None),
        Case("Position: Which ORM should we use for the new service — SQLAlchemy", None, None),
    ],
}

# Ids that name the same stance (written apart above where the phrasing differs in a filler word
# the grouping folds). Synonyms are not: "now" / "immediately" stay two stances (the grouping
# knows no synonyms; the observer may merge them, with a reason).
SAME = {"sqla-use": "sqla"}


def test_the_corpus_is_large_enough() -> None:
    assert sum(len(cases) for cases in CORPUS.values()) >= 80


def _stances(family: str) -> list[tuple[Case, str | None]]:
    cases = CORPUS[family]
    labels: dict[str, str | None] = {}
    for i, case in enumerate(cases):
        pos = parse_position(case.text)
        labels[str(i)] = pos.label if pos is not None else None
    found = seat_stances(labels, seats=SEATS, topic=TOPIC[family])
    return [(case, found[str(i)].stance) for i, case in enumerate(cases)]


@pytest.mark.parametrize("family", sorted(CORPUS))
def test_every_case_has_its_expected_stance(family: str) -> None:
    got = _stances(family)
    for case, stance in got:
        assert (stance is None) == (case.stance is None), (case.text, stance)
    for (a, sa), (b, sb) in combinations(got, 2):
        if a.stance is None or b.stance is None:
            continue
        ea, eb = SAME.get(a.stance, a.stance), SAME.get(b.stance, b.stance)
        assert (sa == sb) == (ea == eb), (a.text, sa, b.text, sb)


@pytest.mark.parametrize(
    "case", [c for cases in CORPUS.values() for c in cases if c.confidence != _ANY]
)
def test_confidence_is_read_leniently_and_absent_is_unknown(case: Case) -> None:
    pos = parse_position(case.text)
    if pos is None:
        assert case.confidence is None
        return
    assert pos.confidence == case.confidence, case.text
