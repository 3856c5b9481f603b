"""Regression: the labels ``0`` and ``.0`` were grouped as one stance whose numbers differ.

Found by the property test of the stance grouping on a fresh clone (hypothesis, labels
``['0', '.0']``): the number pattern skipped a number after a dot, so ``.0`` had no number while
its folded form was ``0``; and the display form dropped the leading decimal point, so ``.5``
grouped with ``5``.

Proves: a bare decimal part is a number (``.0`` is 0, ``.5`` is 0.5, ``-.5`` is -0.5) while the
``3`` of ``1.2.3`` and of ``v.3`` is none of its own; ``0`` and ``.0`` are one stance, ``5`` and
``.5`` two.
"""

from __future__ import annotations

from roundtabled.core.stances import group, numbers


def test_a_bare_decimal_part_is_a_number() -> None:
    assert numbers(".0") == ("0",) and numbers(".5") == ("0.5",) and numbers("-.5") == ("-0.5",)
    assert numbers("1.2.3") == ("1.2",) and numbers("v.3") == ()


def test_the_exact_labels_group_by_their_numbers() -> None:
    names = group(["0", ".0"])
    assert names["0"] == names[".0"]
    names = group(["5", ".5"])
    assert names["5"] != names[".5"]
    assert group(["**.5**", "0.5"])["0.5"] == group(["**.5**", "0.5"])["**.5**"]
