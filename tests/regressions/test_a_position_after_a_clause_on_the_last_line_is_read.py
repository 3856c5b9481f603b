"""A small local model (Qwen2.5-Coder-0.5B, asked what ``d = {'date': 5, 'cherry': 6};
print(d['date'] + d['cherry'])`` prints) closed its reply with the Position line after a clause on
the same last line. The daemon read no position from it (the seat stated nothing, its stance was
lost from the tally) and the eval read no answer, although the label was the right output."""

from __future__ import annotations

from roundtabled.core.positions import parse_position
from roundtabled.core.scoring import read_answer

REPLY = """3. **Print the Result**: The calculated sum `11` is printed.

4. **Final Answer**: The final answer is `11`.

5. **Position Line**: The label of your Position line is the final answer, which is `11`.

6. **Confidence**: The confidence is N/10.

Therefore, the final answer is `11`, Position: 11 — 10 N/10."""

ANOTHER = "The final answer is: Position: 3 — 10 — 10 (confidence 10/10)"


def test_the_daemon_reads_the_position_after_the_clause() -> None:
    pos = parse_position(REPLY)
    assert pos is not None and pos.label == "11" and pos.source == "position"
    other = parse_position(ANOTHER)
    assert other is not None and other.label == "3" and other.confidence == 1.0


def test_the_eval_reads_the_same_answer() -> None:
    assert read_answer(REPLY).text == "11"
    assert read_answer(ANOTHER).text == "3"


def test_only_the_last_line_and_only_without_a_position_line() -> None:
    # a "position:" inside the argument is no closing line
    assert parse_position("The opposing position: use X.\nWe should weigh it.") is None
    # a line that starts with Position: still wins over a clause's on the last line
    pos = parse_position("Position: A — because (confidence 6/10)\nWe agree on it, Position: B")
    assert pos is not None and pos.label == "A"
