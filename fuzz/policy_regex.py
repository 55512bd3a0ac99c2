"""Fuzz target: the safe regex engine against Python's ``re`` on short inputs.

Contract under test: SafeRegex either refuses a pattern with RegexSyntaxError or compiles
it; a compiled pattern answers fullmatch with a bool (or RegexBudgetExceeded) and, where
``re`` accepts the same pattern, gives the same answer as ``re.fullmatch`` with DOTALL.
Input: first byte = pattern length, then the pattern, then the text (UTF-8, lossy).
"""

import re
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from policy_common import run

from glove.policy._regex import RegexBudgetExceeded, RegexSyntaxError, SafeRegex

MAX_DIFFERENTIAL_TEXT_CHARS = 12  # keeps a backtracking ``re`` fast on any pattern


def one_input(data: bytes) -> None:
    """Compile the pattern part and match the text part, comparing with ``re``."""
    if not data:
        return
    split = 1 + data[0] % 64
    pattern = data[1:split].decode("utf-8", "replace")
    text = data[split:].decode("utf-8", "replace")
    try:
        compiled = SafeRegex(pattern)
    except RegexSyntaxError:
        return
    try:
        answer = compiled.fullmatch(text)
    except RegexBudgetExceeded:
        return
    assert isinstance(answer, bool)
    if len(text) > MAX_DIFFERENTIAL_TEXT_CHARS:
        return
    try:
        with warnings.catch_warnings():
            # re warns about syntax it may change later ("[--", nested sets); irrelevant here.
            warnings.simplefilter("ignore")
            reference = re.compile(pattern, re.DOTALL)
    except (re.error, OverflowError, RecursionError):
        return
    expected = reference.fullmatch(text) is not None
    assert answer == expected, (pattern, text, answer)


if __name__ == "__main__":
    run("regex", one_input)
