"""The refinement-eval-v1 fixture DSL: bounds, the typed fixture, its decoder and digest
(sans-IO).

A fixture is JSON and nothing else: five members, no code, no regular expressions::

    {"version": 1, "exit_code": 0, "max_wall_ms": 30000,
     "required": ["tests passed"], "forbidden": ["Traceback", "FAILED"]}

The decoder's stages, each of which can only refuse::

    bytes ──(<= 64 KiB?)──► strict JSON, every key once (paths) ──► version ──► unknown
    members ──► msgspec.convert(Fixture) (types, with the path) ──► literals: count,
    size, NUL, repeats, required literals the normalizer could never produce

Every problem of the first and last stages is collected (up to :data:`MAX_PROBLEMS`);
msgspec's typed stage reports its first. The digest of a fixture is SHA-256 over its
exact bytes, as stored in the library: two fixtures that decode alike but differ by a
space are two fixtures.
"""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any, Final, Literal

import msgspec

from glove.evaluate._json import loads_located
from glove.evaluate.errors import FixtureError, FixtureProblem, member_path

FIXTURE_VERSION: Final = 1
"""The only fixture version this Glove reads."""

MAX_FIXTURE_BYTES: Final = 64 * 1024
"""Largest fixture, in bytes, checked before a byte of it is decoded."""

MAX_LITERALS: Final = 256
"""Most literals one fixture holds, required and forbidden together."""

MAX_LITERAL_BYTES: Final = 4 * 1024
"""Longest literal, in UTF-8 bytes (the evaluator keeps about twice this per stream)."""

MAX_FIXTURE_DEPTH: Final = 16
"""Deepest nesting of containers the strict stage accepts (a fixture needs 2)."""

MAX_EXIT_CODE: Final = 255
"""Largest exit status a process can report; a fixture expects one in 0..255."""

MAX_FIXTURE_WALL_MS: Final = 7 * 24 * 3600 * 1000
"""Largest ``max_wall_ms``, in milliseconds (seven days)."""

MAX_PROBLEMS: Final = 64
"""Most problems one refusal lists (a 64 KiB fixture of junk cannot make a huge reply)."""

SHA256_PREFIX: Final = "sha256:"

#: Characters the text normalizer removes (C0 controls but newline and tab, DEL, C1): a
#: required literal holding one could never match the text it is looked for in.
_REMOVED_BY_NORMALIZER: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class Fixture(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A decoded refinement-eval-v1 fixture (see ``docs/evaluation.md``).

    Attributes:
        version: always :data:`FIXTURE_VERSION`.
        exit_code: the exit status the harness must end with (0..255).
        max_wall_ms: the most wall time, exec to reap, a passing run may take.
        required: literals that must each appear in the normalized text (the output with
            escape sequences and controls removed). The agent can print them on purpose.
        forbidden: literals that must appear neither in the raw bytes nor in the
            normalized text.
    """

    version: Literal[1]
    exit_code: Annotated[int, msgspec.Meta(ge=0, le=MAX_EXIT_CODE)]
    max_wall_ms: Annotated[int, msgspec.Meta(ge=1, le=MAX_FIXTURE_WALL_MS)]
    required: tuple[str, ...]
    forbidden: tuple[str, ...]


_FIELDS: Final = tuple(field.encode_name for field in msgspec.structs.fields(Fixture))
_MSGSPEC_PATH_MARK: Final = " - at `"
_MISSING_PREFIX: Final = "Object missing required field `"


def fixture_digest(data: bytes | bytearray | memoryview) -> str:
    """``"sha256:<64 hex>"`` over the exact bytes of a fixture (as stored, not re-encoded)."""
    return SHA256_PREFIX + hashlib.sha256(data).hexdigest()


def encode_fixture(fixture: Fixture) -> bytes:
    """The compact JSON of ``fixture`` (members in field order); it decodes back to an
    equal fixture. Its digest is that of these bytes, not of whatever text was decoded."""
    return msgspec.json.encode(fixture)


def decode_fixture(data: bytes | bytearray | memoryview) -> Fixture:
    """Decode a fixture strictly (module docstring).

    Raises:
        FixtureError: the data is over :data:`MAX_FIXTURE_BYTES`, is not strict JSON,
            repeats a key, has another version, an unknown member, a wrong type or bound,
            or a literal that is empty, too long, holds NUL, repeats, is both required and
            forbidden, or is required but holds a control the normalizer removes;
            ``problems`` names each with its JSON path.
    """
    if not isinstance(data, bytes):
        data = bytes(memoryview(data))
    if len(data) > MAX_FIXTURE_BYTES:
        raise FixtureError.one(
            "$", f"{len(data)} bytes is over the {MAX_FIXTURE_BYTES}-byte fixture cap"
        )
    raw = loads_located(data, max_depth=MAX_FIXTURE_DEPTH)
    problems = _member_problems(raw)
    if problems:
        raise FixtureError(_capped(problems))
    try:
        fixture = msgspec.convert(raw, Fixture)
    except msgspec.ValidationError as exc:
        raise FixtureError([_from_msgspec(str(exc))]) from exc
    problems = literal_problems(fixture)
    if problems:
        raise FixtureError(_capped(problems))
    return fixture


def _capped(problems: list[FixtureProblem]) -> list[FixtureProblem]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    more = len(problems) - (MAX_PROBLEMS - 1)
    return [
        *problems[: MAX_PROBLEMS - 1],
        FixtureProblem.at("$", f"{more} more problems not listed"),
    ]


def _member_problems(raw: Any) -> list[FixtureProblem]:
    """The version first (another version's members mean something else), then every
    member fixture v1 does not have."""
    if not isinstance(raw, dict):
        return []  # msgspec says "Expected `object`"
    version = raw.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version != FIXTURE_VERSION:
        return [
            FixtureProblem.at(
                "$.version",
                f"unsupported fixture version {version}: this Glove reads version "
                f"{FIXTURE_VERSION}",
            )
        ]
    return [
        FixtureProblem.at(
            member_path("$", key),
            f"unknown field `{key}` (fixture v1 has {', '.join(sorted(_FIELDS))})",
        )
        for key in raw
        if key not in _FIELDS
    ]


def _from_msgspec(message: str) -> FixtureProblem:
    """msgspec's ``"<what> - at `<path>`"`` as a problem; a missing field points at itself."""
    path = "$"
    head, mark, tail = message.rpartition(_MSGSPEC_PATH_MARK)
    if mark and tail.endswith("`"):
        message, path = head, tail[:-1]
    if message.startswith(_MISSING_PREFIX) and message.endswith("`"):
        field = message[len(_MISSING_PREFIX) : -1]
        return FixtureProblem.at(member_path(path, field), f"required field `{field}` is missing")
    return FixtureProblem.at(path, message)


def literal_problems(fixture: Fixture) -> list[FixtureProblem]:
    """Every problem of a typed fixture's literals (empty when there are none): the total
    count, then each literal in order (empty, too long, NUL, repeated, required but never
    matchable, both required and forbidden)."""
    problems: list[FixtureProblem] = []
    total = len(fixture.required) + len(fixture.forbidden)
    if total > MAX_LITERALS:
        problems.append(
            FixtureProblem.at(
                "$",
                f"at most {MAX_LITERALS} literals (required and forbidden together), got {total}",
            )
        )
    required_at: dict[str, int] = {}
    for index, literal in enumerate(fixture.required):
        path = f"$.required[{index}]"
        problem = _literal_problem(literal)
        if problem is None and _REMOVED_BY_NORMALIZER.search(literal):
            problem = (
                "a required literal is looked for in the normalized text, which holds no "
                "control characters but newline and tab: this one could never match"
            )
        if problem is None and literal in required_at:
            problem = f"repeats $.required[{required_at[literal]}]"
        if problem is not None:
            problems.append(FixtureProblem.at(path, problem))
        required_at.setdefault(literal, index)
    forbidden_at: dict[str, int] = {}
    for index, literal in enumerate(fixture.forbidden):
        path = f"$.forbidden[{index}]"
        problem = _literal_problem(literal)
        if problem is None and literal in forbidden_at:
            problem = f"repeats $.forbidden[{forbidden_at[literal]}]"
        if problem is None and literal in required_at:
            problem = f"is also required ($.required[{required_at[literal]}]): no run could pass"
        if problem is not None:
            problems.append(FixtureProblem.at(path, problem))
        forbidden_at.setdefault(literal, index)
    return problems


def _literal_problem(literal: str) -> str | None:
    if not literal:
        return "a literal is not empty (it would match every output)"
    size = len(literal.encode("utf-8"))
    if size > MAX_LITERAL_BYTES:
        return f"a literal is at most {MAX_LITERAL_BYTES} UTF-8 bytes, got {size}"
    if "\x00" in literal:
        return "a literal holds no NUL character"
    return None
