"""Errors of the plan package: a refused plan, and a local policy that cannot judge one.

::

    GloveError
    ├── PlanError               the plan is refused; ``problems`` lists every reason with its path
    │   └── CanonicalError      a value with no RFC 8785 encoding (a hand-built plan, never a
    │                           decoded one)
    └── LocalPolicyError        the owner's LocalPolicy itself is inconsistent (gloved.toml or
                                the exposure registry, not the plan, is at fault)

A :class:`PlanError` is the controller's fault and is answered with its problems; a
:class:`LocalPolicyError` is the owner's and is a bug in whatever filled the policy.
"""

from __future__ import annotations

import json
import re
from typing import Final

import msgspec

from glove.errors import GloveError

__all__ = ["CanonicalError", "LocalPolicyError", "PlanError", "PlanProblem"]

#: Longest path or message a problem keeps, in characters (a hostile key cannot bloat replies).
MAX_PROBLEM_TEXT_CHARS: Final = 240


def printable(text: str, limit: int = MAX_PROBLEM_TEXT_CHARS) -> str:
    """``text`` with every non-printable character (controls, lone surrogates, line breaks)
    written as a ``\\uXXXX`` escape and cut to ``limit`` characters, so an error is one line
    that any encoder accepts."""
    if text.isprintable() and len(text) <= limit:
        return text
    out: list[str] = []
    size = 0
    for char in text:
        piece = char if char.isprintable() else f"\\u{ord(char):04x}"
        if ord(char) > 0xFFFF and not char.isprintable():
            piece = f"\\U{ord(char):08x}"
        if size + len(piece) > limit:
            out.append("...")
            break
        out.append(piece)
        size += len(piece)
    return "".join(out)


_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def member_path(path: str, key: str) -> str:
    """The path of member ``key`` of the object at ``path``: ``$.limits`` for a plain name,
    ``$.labels["a b"]`` (a JSON string, ASCII-escaped) for any other key."""
    if _NAME_RE.fullmatch(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


class PlanProblem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One reason a plan is refused.

    Attributes:
        path: where, in msgspec's form: ``$`` is the whole plan, ``$.limits.memory_bytes`` a
            field, ``$.exposures[2]`` an array item, ``$.labels["a b"]`` a key that is not a
            plain name.
        message: what is wrong and, where it helps, why the rule exists.
    """

    path: str
    message: str

    @classmethod
    def at(cls, path: str, message: str) -> PlanProblem:
        """A problem whose path and message are made printable and bounded."""
        return cls(path=printable(path), message=printable(message))


class PlanError(GloveError):
    """The plan is refused.

    ``str(error)`` is one line naming the first problem (and how many more there are);
    ``problems`` holds all of them, in the order they were found, each with its JSON path.

    Attributes:
        problems: every reason found, never empty.
    """

    code = "invalid_plan"

    def __init__(self, problems: list[PlanProblem]) -> None:
        """Build the error from the problems found (at least one).

        Raises:
            ValueError: ``problems`` is empty (a refusal always has a reason).
        """
        if not problems:
            raise ValueError("a PlanError needs at least one problem")
        self.problems = list(problems)
        first = problems[0]
        more = len(problems) - 1
        tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        super().__init__(f"plan refused at {first.path}: {first.message}{tail}")

    @classmethod
    def one(cls, path: str, message: str) -> PlanError:
        """A refusal with a single problem."""
        return cls([PlanProblem.at(path, message)])


class CanonicalError(PlanError):
    """A value that RFC 8785 cannot encode (not JSON, a lone surrogate, an unsafe integer)."""

    code = "not_canonicalizable"


class LocalPolicyError(GloveError):
    """The local policy handed to validation is inconsistent (unknown limit names, a bad
    exposure record); the fault is the owner's configuration, not the plan."""

    code = "invalid_local_policy"
