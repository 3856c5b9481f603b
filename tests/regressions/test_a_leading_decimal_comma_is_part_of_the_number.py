"""The stance property test found labels that grouped ``,2`` with ``2``: for display a label lost
its leading comma (``,2`` → ``2``) while :func:`numbers` read the comma as a decimal point
(``,2`` is 0.2), so a group held two different numbers. A leading ``,`` before a digit is the
number's, as a leading ``.`` already was."""

from __future__ import annotations

from roundtabled.core.stances import group, numbers, same_stance


def test_a_leading_decimal_comma_keeps_the_number_apart() -> None:
    labels = ["0", "2", ",2"]
    names = group(labels)
    assert names["2"] != names[",2"]
    assert not same_stance("2", ",2")
    assert numbers(",2") == ("0.2",)
    assert same_stance(",2", "0.2") and same_stance(".2", ",2")
