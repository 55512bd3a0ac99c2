"""Turn policy text into compiled rules, or a :class:`PolicyFileError` naming the bad key.

Two passes. msgspec decodes the TOML strictly into the Structs of :mod:`._model` (unknown
keys, wrong types and missing keys are caught there, and its ``$.tools[2].args[0]`` error
locations are rewritten into ``tools[2].args[0].opp``). Then each rule is checked for
meaning: pointer syntax, which keys belong to which operator, bounds, regex syntax, pins.
"""

import hashlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import get_args

import msgspec

from glove.policy._model import (
    ArgRuleSpec,
    FeatureRuleSpec,
    JsonType,
    Op,
    PolicyFileSpec,
    ResourceRuleSpec,
    ToolRuleSpec,
)
from glove.policy._names import (
    MAX_GLOB_CHARS,
    MAX_TOOL_NAME_CHARS,
    is_glob,
    is_valid_glob,
    is_valid_tool_name,
)
from glove.policy._paths import DotDot, PathRejected, normalize_root
from glove.policy._pointer import PointerSyntaxError, parse_pointer
from glove.policy._regex import RegexSyntaxError, SafeRegex
from glove.policy._resources import FEATURES, MAX_URI_CHARS, FeatureRule, ResourceRule
from glove.policy._rules import (
    ArgRule,
    Test,
    ToolRule,
    make_eq,
    make_in,
    make_length,
    make_path,
    make_prefix,
    make_range,
    make_regex,
    make_type,
)
from glove.policy.errors import PolicyFileError

__all__ = [
    "MAX_ARG_RULES_PER_TOOL",
    "MAX_FEATURE_RULES",
    "MAX_IN_VALUES",
    "MAX_POLICY_FILE_BYTES",
    "MAX_RESOURCE_RULES",
    "MAX_TOOL_RULES",
    "POLICY_VERSION",
    "CompiledPolicy",
    "Sections",
    "compile_policy",
    "compile_sections",
]

POLICY_VERSION = 1
"""The only policy file format version."""
MAX_POLICY_FILE_BYTES = 1024 * 1024
"""Largest policy file accepted, in bytes."""
MAX_TOOL_RULES = 1024
"""Most ``[[tools]]`` rules (and, separately, ``[[prompts]]`` rules) in one policy."""
MAX_RESOURCE_RULES = 1024
"""Most ``[[resources]]`` rules in one policy."""
MAX_FEATURE_RULES = 256
"""Most ``[[features]]`` rules in one policy."""
MAX_ARG_RULES_PER_TOOL = 64
"""Most ``[[tools.args]]`` rules under one tool rule."""
MAX_IN_VALUES = 1024
"""Most entries in the ``values`` of an ``in`` rule."""
MAX_RULE_ID_CHARS = 64
"""Longest rule ``id``, in characters."""
MAX_JSON_VALUE_DEPTH = 32
"""Deepest nesting allowed in an ``eq``/``in`` value from the policy file."""

_MSGSPEC_LOCATION = re.compile(r"^(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_MSGSPEC_FIELD = re.compile(r"^Object (?:contains unknown|missing required) field `(?P<f>[^`]*)`")
_RULE_ID = re.compile(r"[A-Za-z0-9_.-]{1,%d}" % MAX_RULE_ID_CHARS)  # noqa: UP031 - a regex
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")

# The keys each operator takes, beyond pointer/op/optional/each/audit.
_OP_KEYS: dict[str, frozenset[str]] = {
    "eq": frozenset({"value"}),
    "in": frozenset({"values"}),
    "prefix": frozenset({"value"}),
    "regex": frozenset({"pattern"}),
    "length": frozenset({"min", "max"}),
    "range": frozenset({"min", "max"}),
    "path": frozenset({"roots", "base", "dotdot"}),
    "type": frozenset({"types"}),
}
# The allowed words of each enumerated key, for error messages.
_CHOICES: dict[str, tuple[str, ...]] = {
    "op": get_args(Op),
    "effect": ("allow", "deny"),
    "audit": ("value", "digest", "omit"),
    "dotdot": ("normalize", "deny"),
    "types": get_args(JsonType),
    "allow": FEATURES,
}
_ALL_OP_KEYS = tuple(sorted(frozenset().union(*_OP_KEYS.values())))


CompiledPolicy = tuple[dict[str, ToolRule], tuple[ToolRule, ...], str]
"""Exact-name rules by name, glob rules in file order, and the SHA-256 of the text."""


class _Invalid(Exception):
    """A meaning error at a key path; turned into PolicyFileError at the top."""

    def __init__(self, key_path: str, problem: str) -> None:
        super().__init__(problem)
        self.key_path = key_path
        self.problem = problem


def _translate_msgspec(source: str, exc: msgspec.MsgspecError) -> PolicyFileError:
    """Rewrite a msgspec error location ``$.tools[2].args[0]`` into ``tools[2].args[0].x``."""
    message = str(exc)
    found = _MSGSPEC_LOCATION.match(message)
    problem = found.group("problem") if found else message
    path = (found.group("path") or "") if found else ""
    path = path.removeprefix(".")
    field = _MSGSPEC_FIELD.match(problem)
    if field is not None:
        path = f"{path}.{field.group('f')}" if path else field.group("f")
        problem = "unknown key" if "unknown" in problem else "missing required key"
    elif problem.startswith("Invalid enum value"):
        problem = "invalid value" + problem.removeprefix("Invalid enum value")
        choices = _CHOICES.get(re.sub(r"\[\d+\]$", "", path).rpartition(".")[2])
        if choices:
            problem += f" (expected one of: {', '.join(choices)})"
    elif isinstance(exc, msgspec.ValidationError):
        problem = problem[:1].lower() + problem[1:]
    else:
        problem = f"not valid TOML: {problem}"
    return PolicyFileError(source, path, problem)


def _is_set(value: object) -> bool:
    return value is not msgspec.UNSET


def _check_json_value(value: object, key_path: str, depth: int = 0) -> None:
    """Refuse TOML values JSON cannot hold (dates, times, non-finite floats)."""
    if depth > MAX_JSON_VALUE_DEPTH:
        raise _Invalid(key_path, f"nested deeper than {MAX_JSON_VALUE_DEPTH}")
    if isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Invalid(key_path, "a non-finite number is not a JSON value")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_json_value(item, f"{key_path}[{index}]", depth + 1)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_json_value(item, f"{key_path}.{key}", depth + 1)
        return
    raise _Invalid(key_path, f"a TOML {type(value).__name__} is not a JSON value")


def _bound(spec: ArgRuleSpec, label: str, *, integral: bool) -> tuple[float | None, float | None]:
    """The ``min``/``max`` of a length or range rule, checked."""
    low = spec.min if _is_set(spec.min) else None
    high = spec.max if _is_set(spec.max) else None
    if low is None and high is None:
        raise _Invalid(f"{label}.min", f"op '{spec.op}' needs 'min', 'max' or both")
    for key, bound in (("min", low), ("max", high)):
        if bound is None:
            continue
        assert isinstance(bound, int | float)
        if integral and (not isinstance(bound, int) or bound < 0):
            raise _Invalid(f"{label}.{key}", "must be a non-negative integer")
        if isinstance(bound, float) and not math.isfinite(bound):
            raise _Invalid(f"{label}.{key}", "must be a finite number")
    assert not isinstance(low, msgspec.UnsetType)
    assert not isinstance(high, msgspec.UnsetType)
    if low is not None and high is not None and low > high:
        raise _Invalid(f"{label}.max", "is below 'min'")
    return low, high


def _path_test(spec: ArgRuleSpec, label: str) -> Test:
    roots_spec = spec.roots if _is_set(spec.roots) else None
    if not roots_spec:
        raise _Invalid(f"{label}.roots", "op 'path' needs at least one root")
    roots: list[str] = []
    for index, root in enumerate(roots_spec):
        try:
            roots.append(normalize_root(root))
        except PathRejected as exc:
            raise _Invalid(f"{label}.roots[{index}]", str(exc)) from exc
    base: str | None = None
    if isinstance(spec.base, str):
        try:
            base = normalize_root(spec.base)
        except PathRejected as exc:
            raise _Invalid(f"{label}.base", str(exc)) from exc
    dotdot = DotDot(spec.dotdot) if isinstance(spec.dotdot, str) else DotDot.NORMALIZE
    return make_path(tuple(roots), base, dotdot)


def _eq_or_prefix_test(spec: ArgRuleSpec, label: str) -> Test:
    if not _is_set(spec.value):
        raise _Invalid(f"{label}.value", f"op '{spec.op}' needs 'value'")
    _check_json_value(spec.value, f"{label}.value")
    if spec.op == "eq":
        return make_eq(spec.value)
    if not isinstance(spec.value, str):
        raise _Invalid(f"{label}.value", "op 'prefix' needs a string")
    return make_prefix(spec.value)


def _in_test(spec: ArgRuleSpec, label: str) -> Test:
    if not isinstance(spec.values, list) or not spec.values:
        raise _Invalid(f"{label}.values", "op 'in' needs a non-empty list")
    if len(spec.values) > MAX_IN_VALUES:
        raise _Invalid(f"{label}.values", f"more than {MAX_IN_VALUES} entries")
    _check_json_value(spec.values, f"{label}.values")
    return make_in(list(spec.values))


def _regex_test(spec: ArgRuleSpec, label: str) -> Test:
    if not isinstance(spec.pattern, str):
        raise _Invalid(f"{label}.pattern", "op 'regex' needs 'pattern'")
    try:
        return make_regex(SafeRegex(spec.pattern))
    except RegexSyntaxError as exc:
        raise _Invalid(f"{label}.pattern", str(exc)) from exc


def _length_test(spec: ArgRuleSpec, label: str) -> Test:
    low, high = _bound(spec, label, integral=True)
    return make_length(None if low is None else int(low), None if high is None else int(high))


def _range_test(spec: ArgRuleSpec, label: str) -> Test:
    return make_range(*_bound(spec, label, integral=False))


def _type_test(spec: ArgRuleSpec, label: str) -> Test:
    if not isinstance(spec.types, list) or not spec.types:
        raise _Invalid(f"{label}.types", "op 'type' needs a non-empty list")
    return make_type(frozenset(spec.types))


_OP_BUILDERS: dict[str, Callable[[ArgRuleSpec, str], Test]] = {
    "eq": _eq_or_prefix_test,
    "in": _in_test,
    "prefix": _eq_or_prefix_test,
    "regex": _regex_test,
    "length": _length_test,
    "range": _range_test,
    "path": _path_test,
    "type": _type_test,
}


def _op_test(spec: ArgRuleSpec, label: str) -> Test:
    """Build the test of one argument rule after checking its operator's keys."""
    for key in _ALL_OP_KEYS:
        if key not in _OP_KEYS[spec.op] and _is_set(getattr(spec, key)):
            raise _Invalid(f"{label}.{key}", f"not a key of op '{spec.op}'")
    return _OP_BUILDERS[spec.op](spec, label)


def _arg_rule(spec: ArgRuleSpec, label: str, shown: str) -> ArgRule:
    try:
        tokens = parse_pointer(spec.pointer)
    except PointerSyntaxError as exc:
        raise _Invalid(f"{label}.pointer", f"not a JSON pointer: {exc}") from exc
    return ArgRule(
        label=shown,
        pointer=spec.pointer,
        tokens=tokens,
        op=spec.op,
        optional=spec.optional,
        each=spec.each,
        audit=spec.audit,
        test=_op_test(spec, label),
    )


def _pin(value: str | msgspec.UnsetType, key_path: str) -> str | None:
    if isinstance(value, msgspec.UnsetType):
        return None
    if _SHA256_HEX.fullmatch(value) is None:
        raise _Invalid(key_path, "must be 64 lowercase hex digits (a SHA-256)")
    return value


def _tool_rule(spec: ToolRuleSpec, index: int, section: str = "tools") -> ToolRule:
    where = f"{section}[{index}]"
    if not is_valid_glob(spec.name) or (
        not is_glob(spec.name) and not is_valid_tool_name(spec.name)
    ):
        raise _Invalid(
            f"{where}.name",
            f"must be a tool name ([A-Za-z0-9_-], at most {MAX_TOOL_NAME_CHARS} characters) "
            f"or a glob adding * and ? (at most {MAX_GLOB_CHARS})",
        )
    label = where
    if isinstance(spec.id, str):
        if _RULE_ID.fullmatch(spec.id) is None:
            raise _Invalid(f"{where}.id", f"must be 1-{MAX_RULE_ID_CHARS} of [A-Za-z0-9_.-]")
        label = spec.id
    glob = is_glob(spec.name)
    description_pin = _pin(spec.description_sha256, f"{where}.description_sha256")
    schema_pin = _pin(spec.schema_sha256, f"{where}.schema_sha256")
    whole_pin = _pin(spec.definition_sha256, f"{where}.definition_sha256")
    if glob and (description_pin or schema_pin or whole_pin):
        raise _Invalid(f"{where}.name", "pins are only allowed on exact tool names")
    if spec.effect == "deny":
        for key, used in (
            ("args", bool(spec.args)),
            ("description_sha256", description_pin is not None),
            ("schema_sha256", schema_pin is not None),
            ("definition_sha256", whole_pin is not None),
            ("strict_args", spec.strict_args),
        ):
            if used:
                raise _Invalid(f"{where}.{key}", "a deny rule takes no arguments rules or pins")
    if len(spec.args) > MAX_ARG_RULES_PER_TOOL:
        raise _Invalid(f"{where}.args", f"more than {MAX_ARG_RULES_PER_TOOL} argument rules")
    args = tuple(
        _arg_rule(arg, f"{where}.args[{number}]", f"{label}.args[{number}]")
        for number, arg in enumerate(spec.args)
    )
    return ToolRule(
        label=label,
        name=spec.name,
        is_glob=glob,
        allow=spec.effect == "allow",
        description_sha256=description_pin,
        schema_sha256=schema_pin,
        definition_sha256=whole_pin,
        strict_args=spec.strict_args,
        named_args=frozenset(arg.tokens[0] for arg in args if arg.tokens),
        args=args,
    )


def _label(spec_id: str | msgspec.UnsetType, where: str, labels: dict[str, str]) -> str:
    """The rule's label (its ``id`` or ``where``), checked unique across the whole file."""
    label = where
    if isinstance(spec_id, str):
        if _RULE_ID.fullmatch(spec_id) is None:
            raise _Invalid(f"{where}.id", f"must be 1-{MAX_RULE_ID_CHARS} of [A-Za-z0-9_.-]")
        label = spec_id
    if label in labels:
        raise _Invalid(f"{where}.id", f"duplicate id (also {labels[label]})")
    labels[label] = where
    return label


def _resource_rule(spec: ResourceRuleSpec, index: int, labels: dict[str, str]) -> ResourceRule:
    where = f"resources[{index}]"
    label = _label(spec.id, where, labels)
    given = [key for key in ("uri", "prefix", "roots") if _is_set(getattr(spec, key))]
    if len(given) != 1:
        raise _Invalid(where, "needs exactly one of 'uri', 'prefix' and 'roots'")
    kind = given[0]
    if _is_set(spec.dotdot) and kind != "roots":
        raise _Invalid(f"{where}.dotdot", "only a 'roots' rule takes 'dotdot'")
    upstream = spec.upstream if isinstance(spec.upstream, str) else None
    if upstream is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]{0,31}", upstream):
        raise _Invalid(f"{where}.upstream", "must be an upstream id (1-32 of [A-Za-z0-9-])")
    pattern = ""
    roots: tuple[str, ...] = ()
    if kind == "roots":
        assert isinstance(spec.roots, list)
        if not spec.roots:
            raise _Invalid(f"{where}.roots", "needs at least one root")
        normalized: list[str] = []
        for number, root in enumerate(spec.roots):
            try:
                normalized.append(normalize_root(root))
            except PathRejected as exc:
                raise _Invalid(f"{where}.roots[{number}]", str(exc)) from exc
        roots = tuple(normalized)
    else:
        value = getattr(spec, kind)
        assert isinstance(value, str)
        if not value or len(value) > MAX_URI_CHARS or not value.isprintable():
            raise _Invalid(f"{where}.{kind}", f"must be 1-{MAX_URI_CHARS} printable characters")
        pattern = value
    dotdot = DotDot(spec.dotdot) if isinstance(spec.dotdot, str) else DotDot.NORMALIZE
    return ResourceRule(
        label=label,
        kind=kind,
        pattern=pattern,
        is_glob=kind == "uri" and is_glob(pattern),
        roots=roots,
        dotdot=dotdot,
        upstream=upstream,
        allow=spec.effect == "allow",
    )


def _feature_rule(spec: FeatureRuleSpec, index: int, labels: dict[str, str]) -> FeatureRule:
    where = f"features[{index}]"
    label = _label(spec.id, where, labels)
    if not re.fullmatch(r"[A-Za-z0-9*?-]{1,32}", spec.upstream):
        raise _Invalid(f"{where}.upstream", "must be an upstream id or a glob of one")
    unknown = [item for item in spec.allow if item not in FEATURES]
    if unknown:
        raise _Invalid(f"{where}.allow", f"unknown feature {unknown[0]!r}")
    return FeatureRule(label=label, upstream=spec.upstream, allow=frozenset(spec.allow))


@dataclass(frozen=True, slots=True)
class Sections:
    """Every compiled section of a policy file."""

    tools: tuple[dict[str, ToolRule], tuple[ToolRule, ...]]
    prompts: tuple[dict[str, ToolRule], tuple[ToolRule, ...]]
    resources_exact: dict[str, ResourceRule]
    resources: tuple[ResourceRule, ...]
    features: tuple[FeatureRule, ...]
    digest: str


def _index_named(
    specs: list[ToolRuleSpec], section: str, labels: dict[str, str]
) -> tuple[dict[str, ToolRule], tuple[ToolRule, ...]]:
    """Compile ``[[tools]]`` or ``[[prompts]]``; index exact names, keep globs in order."""
    if len(specs) > MAX_TOOL_RULES:
        raise _Invalid(section, f"more than {MAX_TOOL_RULES} rules")
    exact: dict[str, ToolRule] = {}
    where_exact: dict[str, int] = {}
    globs: list[ToolRule] = []
    for index, tool_spec in enumerate(specs):
        rule = _tool_rule(tool_spec, index, section)
        # _tool_rule validated the id's syntax; uniqueness is across the whole file.
        where = f"{section}[{index}]"
        if rule.label in labels:
            raise _Invalid(f"{where}.id", f"duplicate id (also {labels[rule.label]})")
        labels[rule.label] = where
        if rule.is_glob:
            globs.append(rule)
        elif rule.name in exact:
            also = where_exact[rule.name]
            raise _Invalid(
                f"{where}.name", f"a second rule for {rule.name!r} (also {section}[{also}])"
            )
        else:
            exact[rule.name] = rule
            where_exact[rule.name] = index
    return exact, tuple(globs)


def _index_rules(spec: PolicyFileSpec, digest: str) -> Sections:
    """Compile every section; refuse duplicate ids and exact names."""
    if spec.version != POLICY_VERSION:
        raise _Invalid("version", f"unsupported version {spec.version} (expected 1)")
    labels: dict[str, str] = {}
    tools = _index_named(spec.tools, "tools", labels)
    prompts = _index_named(spec.prompts, "prompts", labels)
    if len(spec.resources) > MAX_RESOURCE_RULES:
        raise _Invalid("resources", f"more than {MAX_RESOURCE_RULES} rules")
    if len(spec.features) > MAX_FEATURE_RULES:
        raise _Invalid("features", f"more than {MAX_FEATURE_RULES} rules")
    exact: dict[str, ResourceRule] = {}
    ordered: list[ResourceRule] = []
    for index, resource_spec in enumerate(spec.resources):
        rule = _resource_rule(resource_spec, index, labels)
        if rule.kind == "uri" and not rule.is_glob and rule.upstream is None:
            if rule.pattern in exact:
                raise _Invalid(f"resources[{index}].uri", f"a second rule for {rule.pattern!r}")
            exact[rule.pattern] = rule
        else:
            ordered.append(rule)
    features = tuple(
        _feature_rule(feature, index, labels) for index, feature in enumerate(spec.features)
    )
    return Sections(tools, prompts, exact, tuple(ordered), features, digest)


def _decode(text: str | bytes, source: str) -> tuple[PolicyFileSpec, str]:
    data = text.encode() if isinstance(text, str) else bytes(text)
    if len(data) > MAX_POLICY_FILE_BYTES:
        raise PolicyFileError(source, "", f"larger than {MAX_POLICY_FILE_BYTES} bytes")
    try:
        spec = msgspec.toml.decode(data, type=PolicyFileSpec)
    except UnicodeDecodeError as exc:
        raise PolicyFileError(source, "", "not UTF-8") from exc
    except msgspec.MsgspecError as exc:
        raise _translate_msgspec(source, exc) from exc
    return spec, hashlib.sha256(data).hexdigest()


def compile_sections(text: str | bytes, source: str) -> Sections:
    """Decode and check policy text; return every section's rules and the digest.

    Raises:
        PolicyFileError: the text is too large, not UTF-8 TOML, or not a valid policy; the
            error names the key path at fault.
    """
    spec, digest = _decode(text, source)
    try:
        return _index_rules(spec, digest)
    except _Invalid as exc:
        raise PolicyFileError(source, exc.key_path, exc.problem) from exc


def compile_policy(text: str | bytes, source: str) -> CompiledPolicy:
    """Decode and check policy text; return its tool rules and digest.

    Raises:
        PolicyFileError: the text is too large, not UTF-8 TOML, or not a valid policy; the
            error names the key path at fault.
    """
    sections = compile_sections(text, source)
    exact, globs = sections.tools
    return exact, globs, sections.digest
