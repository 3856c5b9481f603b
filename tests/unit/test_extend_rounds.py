"""The cap on a roundtable's rounds over all its extensions (``check_extend_rounds``)."""

from __future__ import annotations

import pytest

from roundtabled.core.state import MAX_TOTAL_ROUNDS
from roundtabled.core.validation import check_extend_rounds
from roundtabled.errors import ValidationFailed


def test_extensions_up_to_the_total_cap_are_accepted() -> None:
    check_extend_rounds(3, 2)
    check_extend_rounds(MAX_TOTAL_ROUNDS - 50, 50)


def test_an_extension_past_the_cap_names_the_field_and_what_is_left() -> None:
    with pytest.raises(ValidationFailed) as err:
        check_extend_rounds(180, 30)
    assert err.value.field == "rounds"
    assert "180" in str(err.value) and "210" in str(err.value)
    assert f"more than {MAX_TOTAL_ROUNDS}" in str(err.value) and "at most 20 more" in str(err.value)


def test_a_full_roundtable_cannot_be_extended() -> None:
    with pytest.raises(ValidationFailed, match="cannot be extended further"):
        check_extend_rounds(MAX_TOTAL_ROUNDS, 1)
