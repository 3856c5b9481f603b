"""``roundtabled eval``: decision quality of a panel on the user's own models (docs/eval.md).

Every question becomes roundtables through the daemon the user runs (its control API) and the
OpenCode server behind it, under one parent session per run. Each protocol of ``--protocols``
is one roundtable the daemon runs with that protocol (``vote``, ``debate``, ``adaptive``,
``council``; ``self-consistency`` is a ``vote`` of copies of one seat), one after another per
question; its answer is read from the product's own result, never re-computed beside it.
``single:<seat>`` is each seat's answer in ``vote``'s independent round (docs/eval.md, "What runs
per question").

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
