"""The policy file as typed, frozen msgspec Structs (decoded strictly from TOML).

These Structs mirror the file one to one; they are checked for meaning (pointer syntax,
operator keys, bounds) by :mod:`glove.policy._compile`, which turns them into the rules
the engine evaluates. The format is documented in ``docs/policy.md``.
"""

from typing import Literal

import msgspec

__all__ = [
    "ArgRuleSpec",
    "Feature",
    "FeatureRuleSpec",
    "JsonType",
    "Op",
    "PolicyFileSpec",
    "ResourceRuleSpec",
    "ToolRuleSpec",
]

Op = Literal["eq", "in", "prefix", "regex", "length", "range", "path", "type"]
JsonType = Literal["string", "integer", "number", "boolean", "array", "object", "null"]
Feature = Literal["logging", "completion", "sampling", "elicitation", "roots"]


class ArgRuleSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One ``[[tools.args]]`` table: a test on the value at a JSON pointer.

    Only the keys of the chosen ``op`` may be set; the compiler names any other.
    """

    pointer: str
    op: Op
    optional: bool = False
    each: bool = False
    audit: Literal["value", "digest", "omit"] = "value"
    value: object = msgspec.UNSET
    values: list[object] | msgspec.UnsetType = msgspec.UNSET
    pattern: str | msgspec.UnsetType = msgspec.UNSET
    min: int | float | msgspec.UnsetType = msgspec.UNSET
    max: int | float | msgspec.UnsetType = msgspec.UNSET
    roots: list[str] | msgspec.UnsetType = msgspec.UNSET
    base: str | msgspec.UnsetType = msgspec.UNSET
    dotdot: Literal["normalize", "deny"] | msgspec.UnsetType = msgspec.UNSET
    types: list[JsonType] | msgspec.UnsetType = msgspec.UNSET


class ToolRuleSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One ``[[tools]]`` table: which tools it covers and what it allows."""

    name: str
    id: str | msgspec.UnsetType = msgspec.UNSET
    effect: Literal["allow", "deny"] = "allow"
    description_sha256: str | msgspec.UnsetType = msgspec.UNSET
    schema_sha256: str | msgspec.UnsetType = msgspec.UNSET
    definition_sha256: str | msgspec.UnsetType = msgspec.UNSET
    strict_args: bool = False
    args: list[ArgRuleSpec] = msgspec.field(default_factory=list)


class ResourceRuleSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One ``[[resources]]`` table: which resource URIs it covers (exactly one of ``uri``,
    ``prefix`` and ``roots``) and whether they may be listed, read and subscribed to."""

    uri: str | msgspec.UnsetType = msgspec.UNSET
    prefix: str | msgspec.UnsetType = msgspec.UNSET
    roots: list[str] | msgspec.UnsetType = msgspec.UNSET
    dotdot: Literal["normalize", "deny"] | msgspec.UnsetType = msgspec.UNSET
    upstream: str | msgspec.UnsetType = msgspec.UNSET
    id: str | msgspec.UnsetType = msgspec.UNSET
    effect: Literal["allow", "deny"] = "allow"


class FeatureRuleSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One ``[[features]]`` table: the features an upstream (id or glob) may use."""

    upstream: str
    allow: list[Feature]
    id: str | msgspec.UnsetType = msgspec.UNSET


class PolicyFileSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The whole policy file."""

    version: int
    tools: list[ToolRuleSpec] = msgspec.field(default_factory=list)
    prompts: list[ToolRuleSpec] = msgspec.field(default_factory=list)
    resources: list[ResourceRuleSpec] = msgspec.field(default_factory=list)
    features: list[FeatureRuleSpec] = msgspec.field(default_factory=list)
