"""``roundtabled eval``: decision quality of a panel on the user's own models (docs/eval.md).

Every question becomes one roundtable through the daemon the user runs (its control API) and the
OpenCode server behind it, under one parent session per run:

1. an independent opening (``opening: "independent"``, one round): each seat's own first answer
   gives ``single:<seat>``, their majority gives ``vote``;
2. when ``debate`` or ``adaptive`` is asked for, an ``extend`` of that roundtable by two rounds,
   and for ``adaptive`` one more round while its panel has not converged: ``debate`` is read after
   the two rounds, ``adaptive`` at the round its convergence rule stops
   (:func:`roundtabled.core.scoring.converged_round`). Both continue from the same openings, so
   flips are measured from the same first answers and the opening is paid once.

Results are appended to ``results.jsonl`` per question (a re-run with the same ``--out`` resumes),
and ``report.md`` / ``report.json`` (and ``accuracy-vs-tokens.png`` with matplotlib) are written
at the end, also after Ctrl-C or a spend cap (then marked partial).

Each roundtable is one question's, driven by this run alone: its id is appended to
``roundtables.jsonl`` as soon as the daemon started it, before the run waits on it. A re-run
attaches to a started roundtable its question has no record of, and a running eval rides out a
daemon restart, so a question never runs twice at once; one that is gone is said, started again
once, and counted in the report (docs/eval.md, "Resuming").

The package, by responsibility: :mod:`~roundtabled.eval.options` (the run's options, questions
and what the seats are asked), :mod:`~roundtabled.eval.question` (one question through the
daemon), :mod:`~roundtabled.eval.ledger` (the run directory's records, its roundtables and its
lock), :mod:`~roundtabled.eval.spending` (calls, tokens, cost, the estimate),
:mod:`~roundtabled.eval.report` (report.json/md and the plot), :mod:`~roundtabled.eval.code`
(the code-reading questions' one run) and :mod:`~roundtabled.eval.run` (the run). The pure
statistics are :mod:`roundtabled.core.scoring`'s; the ``roundtabled eval`` flags are
:mod:`roundtabled.cli.evaluate`'s.
"""
