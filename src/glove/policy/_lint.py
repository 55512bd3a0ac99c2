"""Warnings about a policy measured against the tools upstreams really offer (pure).

``glove policy check --config F`` starts the upstreams, collects their tool definitions and
asks :func:`lint_policy` what the policy can never do with them:

* a rule that matches no tool any upstream offers (a typo, a renamed tool);
* a rule that can never pass for a tool it matches: ``strict_args`` while the tool's schema
  *requires* an argument the rule never names (every valid call carries it, and is refused),
  or a non-optional argument rule whose top-level key the tool's schema does not accept
  (``additionalProperties: false`` without that property: no valid call can carry it).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from glove.policy._engine import Policy
from glove.policy._names import glob_match
from glove.policy._pin import ToolDefinition
from glove.policy._rules import ToolRule

__all__ = ["LintWarning", "lint_policy"]


@dataclass(frozen=True, slots=True)
class LintWarning:
    """One thing the policy will never do: the rule, the tool (if any) and why."""

    rule: str
    tool: str | None
    message: str


def _schema(definition: ToolDefinition) -> Mapping[str, object]:
    schema = definition.input_schema
    return schema if isinstance(schema, Mapping) else {}


def _required(definition: ToolDefinition) -> list[str]:
    required = _schema(definition).get("required")
    return (
        [item for item in required if isinstance(item, str)] if isinstance(required, list) else []
    )


def _closed_properties(definition: ToolDefinition) -> set[str] | None:
    """The properties a closed schema accepts, or None when it accepts anything."""
    schema = _schema(definition)
    if schema.get("additionalProperties") is not False:
        return None
    properties = schema.get("properties")
    return set(properties) if isinstance(properties, Mapping) else set()


def _never_passes(rule: ToolRule, name: str, definition: ToolDefinition) -> str | None:
    if rule.strict_args:
        missing = [key for key in _required(definition) if key not in rule.named_args]
        if missing:
            return (
                f"strict_args, but {name!r} requires {', '.join(map(repr, missing))}, which no "
                "argument rule names: every valid call is refused"
            )
    accepted = _closed_properties(definition)
    if accepted is not None:
        for arg in rule.args:
            if arg.optional or not arg.tokens:
                continue
            if arg.tokens[0] not in accepted:
                return (
                    f"{arg.label} requires {arg.pointer!r}, which the schema of {name!r} does "
                    "not accept (additionalProperties is false): no valid call has it"
                )
    return None


def lint_policy(policy: Policy, tools: Mapping[str, ToolDefinition]) -> Sequence[LintWarning]:
    """Warnings for ``policy`` given the ``tools`` offered (exposed name -> definition).

    Raises:
        Nothing.
    """
    warnings: list[LintWarning] = []
    for rule in policy.rules():
        matched = [name for name in tools if glob_match(rule.name, name)]
        if not matched:
            warnings.append(
                LintWarning(rule.label, None, f"{rule.name!r} matches no tool the upstreams offer")
            )
            continue
        if not rule.allow:
            continue
        for name in matched:
            if policy.rule_for(name) is not rule:
                continue  # an exact rule or an earlier glob decides for this tool
            problem = _never_passes(rule, name, tools[name])
            if problem is not None:
                warnings.append(LintWarning(rule.label, name, f"can never pass: {problem}"))
    return warnings
