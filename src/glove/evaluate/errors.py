"""Errors of refinement-eval-v1: a refused fixture, a misused evaluator, bad A/B inputs.

::

    GloveError
    └── EvaluateError            anything this package raises on purpose
        ├── FixtureError         the fixture is refused; ``problems`` lists every reason
        │                        with its JSON path (``$.required[3]``)
        ├── EvidenceError        the evaluator or the verdict was used against its contract
        │                        (bytes fed after finish, more evicted than seen, evidence
        │                        of another fixture): a bug in the caller, never a verdict
        └── StatsError           A/B inputs that cannot be analysed (unpaired arms, no runs,
                                 an unknown verdict, a seed out of range)

A :class:`FixtureError` is the fixture author's fault and is answered with its problems;
an :class:`EvidenceError` is the caller's; output of the agent can never raise either (it
is only ever evidence).
"""

from __future__ import annotations

import json
import re
from typing import Final

import msgspec

from glove.errors import GloveError

__all__ = ["EvaluateError", "EvidenceError", "FixtureError", "FixtureProblem", "StatsError"]

#: Longest path or message a problem keeps, in characters (a hostile key cannot bloat replies).
MAX_PROBLEM_TEXT_CHARS: Final = 240


def printable(text: str, limit: int = MAX_PROBLEM_TEXT_CHARS) -> str:
    """``text`` with every non-printable character written as a ``\\uXXXX`` escape and cut
    to ``limit`` characters, so an error is one line any encoder accepts."""
    if text.isprintable() and len(text) <= limit:
        return text
    out: list[str] = []
    size = 0
    for char in text:
        if char.isprintable():
            piece = char
        elif ord(char) > 0xFFFF:
            piece = f"\\U{ord(char):08x}"
        else:
            piece = f"\\u{ord(char):04x}"
        if size + len(piece) > limit:
            out.append("...")
            break
        out.append(piece)
        size += len(piece)
    return "".join(out)


_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def member_path(path: str, key: str) -> str:
    """The path of member ``key`` of the object at ``path``: ``$.required`` for a plain
    name, ``$["a b"]`` (a JSON string, ASCII-escaped) for any other key."""
    if _NAME_RE.fullmatch(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


class EvaluateError(GloveError):
    """Base class of the errors of ``glove.evaluate``."""

    code = "evaluate_error"


class FixtureProblem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One reason a fixture is refused.

    Attributes:
        path: where, in msgspec's form: ``$`` is the whole fixture, ``$.max_wall_ms`` a
            field, ``$.forbidden[2]`` a literal, ``$["a b"]`` a key that is not a name.
        message: what is wrong and, where it helps, why the rule exists.
    """

    path: str
    message: str

    @classmethod
    def at(cls, path: str, message: str) -> FixtureProblem:
        """A problem whose path and message are made printable and bounded."""
        return cls(path=printable(path), message=printable(message))


class FixtureError(EvaluateError, ValueError):
    """The fixture is refused.

    ``str(error)`` is one line naming the first problem (and how many more there are);
    ``problems`` holds all of them in the order found, each with its JSON path.

    Attributes:
        problems: every reason found, never empty.
    """

    code = "invalid_fixture"

    def __init__(self, problems: list[FixtureProblem]) -> None:
        """Build the error from the problems found (at least one).

        Raises:
            ValueError: ``problems`` is empty (a refusal always has a reason).
        """
        if not problems:
            raise ValueError("a FixtureError needs at least one problem")
        self.problems = list(problems)
        first = problems[0]
        more = len(problems) - 1
        tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        super().__init__(f"fixture refused at {first.path}: {first.message}{tail}")

    @classmethod
    def one(cls, path: str, message: str) -> FixtureError:
        """A refusal with a single problem."""
        return cls([FixtureProblem.at(path, message)])


class EvidenceError(EvaluateError, ValueError):
    """The evaluator or the verdict function was called against its contract (the caller's
    bug: bytes after :meth:`~glove.evaluate.StreamEvaluator.finish`, more bytes evicted
    than seen, evidence that belongs to another fixture)."""

    code = "evidence_misuse"


class StatsError(EvaluateError, ValueError):
    """A/B inputs the statistics cannot analyse (the arms are not paired run for run, a
    fixture has no runs, a verdict is unknown, a seed or bound is out of range)."""

    code = "invalid_ab_input"
