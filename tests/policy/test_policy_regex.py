"""The linear-time regex subset: agrees with ``re`` where both apply, refuses the rest."""

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.policy import _regex
from glove.policy._regex import (
    MAX_REGEX_INPUT_CHARS,
    MAX_REGEX_PATTERN_CHARS,
    RegexBudgetExceeded,
    RegexSyntaxError,
    SafeRegex,
)

ATOMS = ["a", "b", "1", ".", "[ab]", "[^a]", "[a-b1]", "\\d", "\\w", "\\D", "\\.", "[]a]", "[a-]"]


def _quantify(pattern: str, quantifier: str) -> str:
    return f"(?:{pattern}){quantifier}"


patterns = st.recursive(
    st.sampled_from(ATOMS),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map("".join),
        st.tuples(inner, inner).map(lambda pair: f"(?:{pair[0]}|{pair[1]})"),
        st.tuples(inner, inner).map(lambda pair: f"({pair[0]}|{pair[1]})"),
        st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{0,2}", "{1,}", "{,2}"])).map(
            lambda pair: _quantify(*pair)
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(patterns, st.lists(st.text(alphabet="ab1.\n", max_size=7), min_size=1, max_size=6))
def test_agrees_with_re_fullmatch(pattern: str, texts: list[str]) -> None:
    """On the supported subset, the answer equals ``re.fullmatch`` with DOTALL."""
    compiled = SafeRegex(pattern)
    reference = re.compile(pattern, re.DOTALL)
    for text in texts:
        assert compiled.fullmatch(text) == (reference.fullmatch(text) is not None), text


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("", [""], ["a"]),
        ("a|", ["", "a"], ["b"]),
        ("()*a", ["a"], ["", "aa"]),
        ("(a*)*b", ["b", "aaab"], ["aaa"]),
        ("[A-Za-z0-9 .,!?-]{1,200}", ["Hello, world!", "x" * 200], ["", "x" * 201, "tab\t"]),
        ("\\s+", [" \t\n"], ["x"]),
        ("[\\d_]+", ["1_2"], ["a"]),
        ("\\W", ["-"], ["a"]),
        ("\\S\\S", ["ab"], ["a "]),
        ("x{3}", ["xxx"], ["xx", "xxxx"]),
        ("[\\]\\-]+", ["]-"], ["a"]),
        ("é+", ["éé"], ["e"]),
        ("\\w+", ["aZ0_"], ["é", "-"]),  # ASCII classes, unlike re's Unicode defaults
        ("\\d", ["5"], ["\u0663", "x"]),
        ("[a-z]+", ["abc"], ["abc\n"]),  # whole-value match: no "$ before newline" hole
        ("\\{\\}\\(\\)\\^\\$\\/\\|\\*\\+\\?\\\\", ["{}()^$/|*+?\\"], [""]),
    ],
)
def test_hand_picked_cases(pattern: str, yes: list[str], no: list[str]) -> None:
    """Edge cases: empty pattern, empty loops, bounded counts, escapes, non-ASCII."""
    compiled = SafeRegex(pattern)
    for text in yes:
        assert compiled.fullmatch(text), text
    for text in no:
        assert not compiled.fullmatch(text), text


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("^a", "anchor"),
        ("a$", "anchor"),
        ("(a", "missing ')'"),
        ("a)", "unbalanced"),
        ("*a", "nothing to repeat"),
        ("a**", "multiple repeat"),
        ("a*?", "lazy and possessive"),
        ("a++", "lazy and possessive"),
        ("(?=a)", "non-capturing"),
        ("(?P<n>a)", "non-capturing"),
        ("(?i)a", "non-capturing"),
        ("\\1", "escape"),
        ("\\b", "escape"),
        ("\\p{L}", "escape"),
        ("a\\", "ends with"),
        ("[a", "missing ']'"),
        ("[b-a]", "out of order"),
        ("[[]", "must be escaped"),
        ("[\\D]", "negated shorthand"),
        ("[a-\\d]", "cannot end a range"),
        ("a{", "missing '}'"),
        ("a{x}", "malformed"),
        ("a{}", "malformed"),
        ("a{1,2,3}", "malformed"),
        ("a{\u0661}", "malformed"),
        ("a{3,1}", "out of order"),
        ("a{1001}", "above"),
        ("[a-z]{1000}[a-z]{1000}", "states"),
        ("(" * 40 + ")" * 40, "nested"),
        ("a" * (MAX_REGEX_PATTERN_CHARS + 1), "longer"),
    ],
)
def test_unsupported_or_unbounded_patterns_are_refused(pattern: str, problem: str) -> None:
    """Anchors, lookaround, backreferences, flags and oversized patterns are compile errors."""
    with pytest.raises(RegexSyntaxError, match=re.escape(problem)):
        SafeRegex(pattern)


@pytest.mark.parametrize("pattern", ["(a+)+b", "(a|a)*b", "(a|aa)+b", "(.*)*x", "(a?){30}a{30}"])
def test_catastrophic_patterns_for_backtrackers_answer_at_once(pattern: str) -> None:
    """Patterns that make ``re`` backtrack exponentially are answered in one pass."""
    assert SafeRegex(pattern).fullmatch("a" * MAX_REGEX_INPUT_CHARS) is False


def test_input_longer_than_the_bound_is_refused() -> None:
    """A value above the input bound raises instead of being matched."""
    with pytest.raises(RegexBudgetExceeded, match="longer"):
        SafeRegex(".*").fullmatch("a" * (MAX_REGEX_INPUT_CHARS + 1))


def test_dfa_blowup_hits_the_work_bound() -> None:
    """A pattern that keeps hundreds of states live on new sets is refused by the work bound."""
    compiled = SafeRegex("[ab]*a" + "[ab]{100}" * 8 + "b")
    rng = random.Random(7)
    text = "".join(rng.choice("ab") for _ in range(MAX_REGEX_INPUT_CHARS))
    with pytest.raises(RegexBudgetExceeded, match="automaton states"):
        compiled.fullmatch(text)


def test_transition_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo of transitions is dropped when full, and answers stay correct."""
    monkeypatch.setattr(_regex, "MAX_REGEX_CACHE_ENTRIES", 4)
    compiled = SafeRegex("[a-z]{1,50}")
    assert compiled.fullmatch("abcdefghijklmnopqrstuvwxyz")
    assert len(compiled._cache) <= 4
    assert not compiled.fullmatch("abc1")
    assert repr(compiled) == "SafeRegex('[a-z]{1,50}')"
