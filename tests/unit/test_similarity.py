"""Loop detection (docs/behaviour.md, 'Loops'): cleaning, bigrams, Jaccard similarity, the strict
threshold."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roundtabled.core.similarity import bigrams, clean_text, is_loop, jaccard_bigrams


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("**Hello** world", "hello world"),
        ("__Hello__ _world_", "hello world"),
        ("snake_case stays", "snake_case stays"),
        ("# Title\n## Sub", "title sub"),
        ("#hashtag is not a heading", "#hashtag is not a heading"),
        ("- one\n* two\n+ three\n1. four\n2) five", "one two three four five"),
        ("[the docs](https://example.com/a_b) here", "the docs here"),
        ("![alt text](img.png)", "alt text"),
        ("use `pip install` now", "use pip install now"),
        ("```python\nx = 1\n```", "x = 1"),
        ("~~~\ncode\n~~~", "code"),
        ("> quoted\n>> nested", "quoted nested"),
        ("a\n\n---\n\nb", "a b"),
        ("  Many \t spaces\n\nand LINES  ", "many spaces and lines"),
        ("~~struck~~", "struck"),
        ("", ""),
        ("[unclosed link text", "[unclosed link text"),
    ],
)
def test_clean_text(raw: str, cleaned: str) -> None:
    assert clean_text(raw) == cleaned


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", set()),
        ("a", set()),
        ("ab", {"ab"}),
        ("abab", {"ab", "ba"}),
        ("aaa", {"aa"}),
        ("é😀", {"é😀"}),
    ],
)
def test_bigrams(text: str, expected: set[str]) -> None:
    assert bigrams(text) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("", "", 0.0),  # an empty reply is not a loop
        ("x", "x", 0.0),  # no bigram at all
        ("hello", "", 0.0),
        ("abc", "abc", 1.0),
        ("**Hello** world", "hello world", 1.0),
        ("abc", "xyz", 0.0),
        ("abcd", "abce", 2 / 4),  # {ab, bc, cd} vs {ab, bc, ce}
    ],
)
def test_jaccard_table(a: str, b: str, expected: float) -> None:
    assert jaccard_bigrams(a, b) == pytest.approx(expected)


def test_is_loop_is_strictly_greater_than_threshold() -> None:
    # {ab, bc, cd} vs {ab, bc, ce}: exactly 0.5
    assert not is_loop("abcd", "abce", 0.5)
    assert is_loop("abcd", "abce", 0.49)
    assert is_loop("The same argument again.", "**The same argument again.**", 0.85)
    assert not is_loop("", "", 0.0)
    assert not is_loop("identical text", "identical text", 1.0)


def test_paraphrased_repetition_is_a_loop_and_a_new_answer_is_not() -> None:
    first = (
        "I still believe a modular monolith is the right call: it keeps deployment simple "
        "while letting us split the payments module later if the load demands it."
    )
    again = (
        "I still believe a modular monolith is the right call — it keeps deployment simple, "
        "while letting us split the payments module later if load demands it."
    )
    other = "Let us measure the latency budget first; PCI scope matters more than topology."
    assert is_loop(again, first, 0.85)
    assert not is_loop(other, first, 0.85)


@given(st.text(), st.text())
def test_symmetric_and_in_range(a: str, b: str) -> None:
    s = jaccard_bigrams(a, b)
    assert 0.0 <= s <= 1.0
    assert s == jaccard_bigrams(b, a)


@given(st.text())
def test_identical_nonempty_is_one(a: str) -> None:
    if len(clean_text(a)) >= 2:
        assert jaccard_bigrams(a, a) == 1.0
    else:
        assert jaccard_bigrams(a, a) == 0.0


@given(st.text())
def test_clean_text_is_idempotent_on_words(a: str) -> None:
    once = clean_text(a)
    assert once == " ".join(once.split())
    assert once == once.lower()


@given(st.text(alphabet="[]()!*_`#>-~ \nab", max_size=400))
def test_markdown_noise_never_raises(a: str) -> None:
    clean_text(a)
    assert 0.0 <= jaccard_bigrams(a, a[::-1]) <= 1.0
