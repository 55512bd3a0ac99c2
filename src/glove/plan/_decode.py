"""Decoding plan v1: size cap, strict JSON, refusals by name, typed decode, structure (sans-IO).

The stages, each of which can only refuse::

    bytes ──(<= 64 KiB?)──► loads_strict ──► lone surrogates? ──► version, named and unknown
    members ──► msgspec.convert(Plan) ──► identifiers, repeats, counts, terminal size, labels

The strict stage is the shared ``glove.protocol`` parser (one value, no duplicate keys even
after unescaping, no NaN/Infinity, at most 64 nested containers); when it refuses, a second,
lenient parse that keeps duplicate members finds the JSON path of the fault, so the error
names ``$.limits.pids`` rather than just "duplicate key". Members the spec rejects
(``prompt_ref``, ``argv``, ``env``, ``cwd`` ...) are refused by name with the reason, before
the generic unknown-field refusal; every problem of those stages is collected, not only the
first. msgspec's typed decode reports one problem (its first), with its path.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from glove.egress import parse_rule
from glove.egress.errors import RuleError
from glove.plan._model import (
    IDENTIFIER_RE,
    LABEL_KEY_RE,
    MAX_EXPOSURES,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
    MAX_PLAN_BYTES,
    MAX_PLAN_DEPTH,
    MAX_PROJECTIONS,
    PLAN_VERSION,
    PROJECTION_DIGEST_RE,
    Plan,
    PlanLimits,
    PlanProjection,
    ProxyNetwork,
)
from glove.plan.errors import PlanError, PlanProblem, member_path
from glove.protocol import loads_strict

#: Most problems one refusal lists: enough for every validation problem of a plan at its
#: bounds (a harness, 32 exposures, six limits, network, terminal), while a 64 KiB plan of
#: junk keys still cannot make a 64 KiB reply.
MAX_PROBLEMS: Final = 64

_COMMAND = (
    "a command line comes only from the owner's gloved.toml [harnesses.<id>] table; "
    "name the harness instead"
)
_ENVIRONMENT = "a plan carries no environment; the harness's comes from gloved.toml"
_PATHS = "raw paths never appear in a plan; name an exposure alias (glove init ALIAS PATH)"
_LIBRARY = 'a plan names library bundles by digest: "projections": [{"alias", "digest", "size"}]'
#: Members the spec rejects, with why; refused by name wherever a plan object has members.
REJECTED_MEMBERS: Final[dict[str, str]] = {
    "prompt_ref": "bundle expansion into harness-native prompt directories is not implemented",
    "argv": _COMMAND,
    "command": _COMMAND,
    "cmd": _COMMAND,
    "args": _COMMAND,
    "env": _ENVIRONMENT,
    "environment": _ENVIRONMENT,
    "cwd": _PATHS,
    "path": _PATHS,
    "paths": _PATHS,
    "workspace": _PATHS,
    "binds": _PATHS,
    "mounts": _PATHS,
    "host_path": _PATHS,
    "bundles": _LIBRARY,
    "library": _LIBRARY,
}

_PLAN_FIELDS: Final = frozenset(field.encode_name for field in msgspec.structs.fields(Plan))
_LIMIT_FIELDS: Final = frozenset(field.encode_name for field in msgspec.structs.fields(PlanLimits))
_PROJECTION_FIELDS: Final = frozenset(
    field.encode_name for field in msgspec.structs.fields(PlanProjection)
)
_MSGSPEC_PATH_MARK: Final = " - at `"
_MISSING_PREFIX: Final = "Object missing required field `"


class _StrictRefusal(Exception):
    """What ``loads_strict`` raises here; never leaves this module."""


def decode_plan(data: bytes | bytearray | memoryview) -> Plan:
    """Decode plan v1 JSON: strictly, then into typed Structs, then check its structure.

    Raises:
        PlanError: the text is over MAX_PLAN_BYTES, not strict JSON, names a member the spec
            rejects or does not know, has a wrong type or bound, or a bad identifier, repeat,
            count, terminal size or label; ``problems`` names each with its JSON path.
    """
    if not isinstance(data, bytes):
        data = bytes(memoryview(data))  # memoryview: an int is not "that many zero bytes"
    if len(data) > MAX_PLAN_BYTES:
        raise PlanError.one("$", f"{len(data)} bytes is over the {MAX_PLAN_BYTES}-byte plan cap")
    raw = _strict(data)
    problems = _member_problems(raw)
    if problems:
        raise PlanError(capped(problems))
    try:
        plan = msgspec.convert(raw, Plan)
    except msgspec.ValidationError as exc:
        raise PlanError([_from_msgspec(str(exc))]) from exc
    problems = plan_problems(plan)
    if problems:
        raise PlanError(capped(problems))
    return plan


def capped(problems: list[PlanProblem]) -> list[PlanProblem]:
    """``problems``, or its first MAX_PROBLEMS - 1 and a count of the rest."""
    if len(problems) <= MAX_PROBLEMS:
        return problems
    more = len(problems) - (MAX_PROBLEMS - 1)
    return [*problems[: MAX_PROBLEMS - 1], PlanProblem.at("$", f"{more} more problems not listed")]


# --- strict JSON, and where it failed ------------------------------------------------------


def _strict(data: bytes) -> Any:
    try:
        raw = loads_strict(data, _StrictRefusal, max_depth=MAX_PLAN_DEPTH)
    except _StrictRefusal as exc:
        located = _locate(data)
        raise PlanError([located or PlanProblem.at("$", str(exc))]) from exc
    surrogate = _first_lone_surrogate(raw)
    if surrogate is not None:
        raise PlanError([surrogate])
    return raw


class _Members(list[tuple[str, Any]]):
    """An object as its member list, duplicates kept (only while locating a fault)."""


class _Bad:
    """A scalar the strict parser refuses, kept in place so the walk finds its path."""

    def __init__(self, message: str) -> None:
        self.message = message


def _bad_constant(name: str) -> _Bad:
    return _Bad(f"{name} is not JSON")


def _bad_or_float(text: str) -> float | _Bad:
    value = float(text)
    if math.isinf(value):
        return _Bad(f"number {text[:32]} is out of range")
    return value


def _bad_or_int(text: str) -> int | _Bad:
    try:
        return int(text)
    except ValueError:  # Python's integer digit limit
        return _Bad(f"an integer of {len(text)} digits is out of range")


def _locate(data: bytes) -> PlanProblem | None:
    """The path and reason of the first strict-JSON fault in ``data``, in document order, or
    None when the text is not JSON at all (the parser's line and column then say where)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return PlanProblem.at("$", f"not UTF-8: {exc.reason} at byte {exc.start}")
    try:
        tree = json.loads(
            text,
            object_pairs_hook=_Members,
            parse_constant=_bad_constant,
            parse_float=_bad_or_float,
            parse_int=_bad_or_int,
        )
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, str, int]] = [(tree, "$", 1)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, list) and depth > MAX_PLAN_DEPTH:
            return PlanProblem.at(path, f"nested deeper than {MAX_PLAN_DEPTH} containers")
        if isinstance(node, _Members):
            seen: set[str] = set()
            children: list[tuple[Any, str, int]] = []
            for key, child in node:
                if key in seen:
                    return PlanProblem.at(
                        member_path(path, key),
                        f"duplicate key {key!r} (keys are compared after unescaping)",
                    )
                seen.add(key)
                children.append((child, member_path(path, key), depth + 1))
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend(
                (child, f"{path}[{index}]", depth + 1)
                for index, child in reversed(list(enumerate(node)))
            )
        elif isinstance(node, _Bad):
            return PlanProblem.at(path, node.message)
    # The shared strict parser refuses lone surrogates too (without a path): find it here.
    return _first_lone_surrogate(json.loads(text))


def _lone_surrogate(text: str) -> int | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return ord(text[exc.start])
    return None


def _first_lone_surrogate(raw: Any) -> PlanProblem | None:
    """Python's json accepts ``"\\ud800"`` alone; a plan must be valid Unicode throughout."""
    stack: list[tuple[Any, str]] = [(raw, "$")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            code = _lone_surrogate(node)
            if code is not None:
                return PlanProblem.at(path, f"a lone surrogate \\u{code:04x} is not Unicode text")
        elif isinstance(node, dict):
            for key, child in reversed(list(node.items())):
                code = _lone_surrogate(key)
                if code is not None:
                    return PlanProblem.at(
                        member_path(path, key), f"a key holds a lone surrogate \\u{code:04x}"
                    )
                stack.append((child, member_path(path, key)))
        elif isinstance(node, list):
            stack.extend((child, f"{path}[{i}]") for i, child in reversed(list(enumerate(node))))
    return None


# --- members refused by name, and unknown ones -----------------------------------------------


def _member_problems(raw: Any) -> list[PlanProblem]:
    """Version first (another version's members mean something else), then the members the
    spec rejects, by name, then the ones plan v1 does not have."""
    if not isinstance(raw, dict):
        return []  # msgspec says "Expected `object`"
    version = raw.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version != PLAN_VERSION:
        return [
            PlanProblem.at(
                "$.version",
                f"unsupported plan version {version}: this Glove reads version {PLAN_VERSION}",
            )
        ]
    named: list[PlanProblem] = []
    unknown: list[PlanProblem] = []
    _sort_members(raw, "$", _PLAN_FIELDS, named, unknown)
    limits = raw.get("limits")
    if isinstance(limits, dict):
        _sort_members(limits, "$.limits", _LIMIT_FIELDS, named, unknown)
    projections = raw.get("projections")
    if isinstance(projections, list):
        for index, item in enumerate(projections):
            if isinstance(item, dict):
                _sort_members(item, f"$.projections[{index}]", _PROJECTION_FIELDS, named, unknown)
    network = raw.get("network")
    if isinstance(network, dict):
        problem = _network_object(network)
        if problem is not None:
            named.append(problem)
    return named + unknown


def _sort_members(
    obj: Mapping[str, object],
    path: str,
    fields: frozenset[str],
    named: list[PlanProblem],
    unknown: list[PlanProblem],
) -> None:
    for key in obj:
        reason = REJECTED_MEMBERS.get(key)
        if reason is not None:
            named.append(PlanProblem.at(member_path(path, key), f"`{key}` is refused: {reason}"))
        elif key not in fields:
            unknown.append(
                PlanProblem.at(
                    member_path(path, key),
                    f"unknown field `{key}` (plan v1 has {', '.join(sorted(fields))} here)",
                )
            )


def _network_object(network: Mapping[str, object]) -> PlanProblem | None:
    """The object form is ``{"mode": "proxy", ...}``; the mode is never implied (the
    canonical form is the plan as sent, so a missing tag must not be filled in)."""
    mode = network.get("mode")
    if mode == "proxy":
        return None
    if mode is None:
        return PlanProblem.at(
            "$.network.mode",
            'required field `mode` is missing: the object form is {"mode": "proxy", "allow": '
            '[...]}; without parameters the network is the string "none"',
        )
    return PlanProblem.at(
        "$.network",
        'the object form is for mode "proxy" ({"mode": "proxy", "allow": [...]}); '
        'network mode "none" is the string "none"',
    )


def _from_msgspec(message: str) -> PlanProblem:
    """msgspec's ``"<what> - at `<path>`"`` as a problem; a missing field points at itself."""
    path = "$"
    head, mark, tail = message.rpartition(_MSGSPEC_PATH_MARK)
    if mark and tail.endswith("`"):
        message, path = head, tail[:-1]
    if message.startswith(_MISSING_PREFIX) and message.endswith("`"):
        field = message[len(_MISSING_PREFIX) : -1]
        return PlanProblem.at(member_path(path, field), f"required field `{field}` is missing")
    return PlanProblem.at(path, message)


# --- structure of a typed plan ---------------------------------------------------------------


def _looks_like_path(value: str) -> bool:
    return "/" in value or "\\" in value or value.startswith((".", "~"))


def _identifier(path: str, value: str, hint: str) -> PlanProblem | None:
    if IDENTIFIER_RE.fullmatch(value):
        return None
    if _looks_like_path(value):
        return PlanProblem.at(path, f"raw paths are not accepted: {hint}")
    return PlanProblem.at(
        path,
        f"{value!r} is not an identifier (1-64 of a-z, 0-9, _ and -, starting with a letter "
        f"or digit): {hint}",
    )


def plan_problems(plan: Plan) -> list[PlanProblem]:
    """Every structural problem of a typed plan: identifiers, repeated or too many aliases,
    a terminal size without a pty, labels out of bounds (empty when there are none)."""
    problems: list[PlanProblem] = []
    harness = _identifier("$.harness", plan.harness, "name a harness id from gloved.toml")
    if harness is not None:
        problems.append(harness)
    if len(plan.exposures) > MAX_EXPOSURES:
        problems.append(
            PlanProblem.at(
                "$.exposures", f"at most {MAX_EXPOSURES} exposures, got {len(plan.exposures)}"
            )
        )
    first_at: dict[str, int] = {}
    for index, alias in enumerate(plan.exposures):
        path = f"$.exposures[{index}]"
        problem = _identifier(path, alias, "name an exposure alias created with glove init")
        if problem is not None:
            problems.append(problem)
        elif alias in first_at:
            problems.append(
                PlanProblem.at(
                    path,
                    f"exposure {alias!r} is named twice (first at $.exposures[{first_at[alias]}])",
                )
            )
        else:
            first_at[alias] = index
    problems.extend(_terminal_problems(plan))
    problems.extend(_projection_problems(plan))
    problems.extend(_label_problems(plan))
    problems.extend(_network_problems(plan))
    problems.extend(_evaluation_problems(plan))
    return problems


def _evaluation_problems(plan: Plan) -> list[PlanProblem]:
    """An evaluation judges the raw terminal stream, so it needs one (``"terminal": "pty"``)."""
    if plan.evaluation is msgspec.UNSET or plan.terminal == "pty":
        return []
    return [
        PlanProblem.at(
            "$.evaluation",
            'evaluation is only for terminal "pty": refinement-eval-v1 judges the raw '
            "terminal stream",
        )
    ]


def _projection_problems(plan: Plan) -> list[PlanProblem]:
    """Each projection names an alias once, by identifier, and a ``sha256:<64 hex>`` digest."""
    projections = plan.projection_list
    problems: list[PlanProblem] = []
    if len(projections) > MAX_PROJECTIONS:
        problems.append(
            PlanProblem.at(
                "$.projections", f"at most {MAX_PROJECTIONS} projections, got {len(projections)}"
            )
        )
    first_at: dict[str, int] = {}
    for index, projection in enumerate(projections):
        path = f"$.projections[{index}]"
        alias = _identifier(
            f"{path}.alias", projection.alias, "name a [projections.ALIAS] alias of gloved.toml"
        )
        if alias is not None:
            problems.append(alias)
        elif projection.alias in first_at:
            problems.append(
                PlanProblem.at(
                    f"{path}.alias",
                    f"projection {projection.alias!r} is named twice (first at "
                    f"$.projections[{first_at[projection.alias]}])",
                )
            )
        else:
            first_at[projection.alias] = index
        if not PROJECTION_DIGEST_RE.fullmatch(projection.digest):
            problems.append(
                PlanProblem.at(
                    f"{path}.digest",
                    "a digest is sha256: and 64 lower-case hex digits (as glove library add "
                    "prints it)",
                )
            )
    return problems


def _network_problems(plan: Plan) -> list[PlanProblem]:
    """Every egress rule of a ``proxy`` network must load (the syntax of ``docs/egress.md``)."""
    network = plan.network
    if not isinstance(network, ProxyNetwork):
        return []
    problems: list[PlanProblem] = []
    for action, rules in (("allow", network.allow), ("deny", network.deny_rules)):
        for index, text in enumerate(rules):
            try:
                parse_rule(text, action)  # type: ignore[arg-type]
            except RuleError as exc:
                problems.append(PlanProblem.at(f"$.network.{action}[{index}]", str(exc)))
    return problems


def _terminal_problems(plan: Plan) -> list[PlanProblem]:
    has_rows = plan.rows is not msgspec.UNSET
    has_cols = plan.cols is not msgspec.UNSET
    if plan.terminal != "pty":
        return [
            PlanProblem.at(f"$.{name}", f'{name} is only for terminal "pty"')
            for name, present in (("rows", has_rows), ("cols", has_cols))
            if present
        ]
    if has_rows != has_cols:
        missing = "cols" if has_rows else "rows"
        return [PlanProblem.at(f"$.{missing}", "rows and cols come together (a terminal size)")]
    return []


def _label_problems(plan: Plan) -> list[PlanProblem]:
    if not isinstance(plan.labels, dict):
        return []
    problems: list[PlanProblem] = []
    if len(plan.labels) > MAX_LABELS:
        problems.append(
            PlanProblem.at("$.labels", f"at most {MAX_LABELS} labels, got {len(plan.labels)}")
        )
    for key, value in plan.labels.items():
        path = member_path("$.labels", key)
        if not LABEL_KEY_RE.fullmatch(key):
            problems.append(
                PlanProblem.at(
                    path,
                    "a label key is 1-64 of A-Z, a-z, 0-9, _, . and -, starting with a letter "
                    "or digit (no paths)",
                )
            )
        if len(value) > MAX_LABEL_VALUE_CHARS:
            problems.append(
                PlanProblem.at(
                    path,
                    f"a label value is at most {MAX_LABEL_VALUE_CHARS} characters, "
                    f"got {len(value)}",
                )
            )
        elif not value.isprintable():
            problems.append(
                PlanProblem.at(
                    path, "a label value is printable text (no control or separator characters)"
                )
            )
        elif "/" in value or "\\" in value:
            problems.append(PlanProblem.at(path, "a label value holds no path (no / or \\)"))
    return problems
