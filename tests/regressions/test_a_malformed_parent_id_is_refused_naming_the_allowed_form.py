"""``roundtabled start --parent ses_nope …`` was refused with "--parent must look like 'ses_…'",
which ``ses_nope`` already does: the rule it broke (6 to 64 letters or digits after ``ses_``)
went unsaid. Now the refusal names the allowed form precisely, exit 2 (the real 1.x server;
nothing reaches the model).
"""

from __future__ import annotations

from tests.e2e.cli_helpers import assert_clean_error, cli
from tests.e2e.conftest import RT


async def test_ses_nope_is_refused_naming_the_form(rt: RT) -> None:
    run = await cli(rt, "start", "--agents", "pm,dev", "--parent", "ses_nope", "Monolith?")
    assert_clean_error(
        run, 2, "Error: --parent must be 'ses_' then 6 to 64 letters or digits, got 'ses_nope'"
    )
    assert "must look like" not in run.err
    assert rt.llm.requests == [], "nothing was started"
