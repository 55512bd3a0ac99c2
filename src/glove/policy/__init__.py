"""MCP tool policy: deny by default, allow rules per tool, argument rules, pins.

A pure, sans-IO engine; only :func:`load_policy` reads a file. See ``docs/policy.md`` for
the file format and the contract with the MCP mediator::

    policy = load_policy("policy.toml")
    policy.check_tool("fs__read_text_file", definition).allowed
    policy.check_call("fs__read_text_file", {"path": "/srv/work/a"}, definition)
"""

from glove.policy._engine import (
    ALLOW_ALL,
    ALLOW_ALL_TEXT,
    Decision,
    Policy,
    allow_all_policy,
    parse_policy,
)
from glove.policy._lint import LintWarning, lint_policy
from glove.policy._load import load_policy
from glove.policy._pin import (
    ToolDefinition,
    canonical_json,
    definition_digests,
    full_definition_digest,
)
from glove.policy.errors import PolicyError, PolicyFileError

__all__ = [
    "ALLOW_ALL",
    "ALLOW_ALL_TEXT",
    "Decision",
    "LintWarning",
    "Policy",
    "PolicyError",
    "PolicyFileError",
    "ToolDefinition",
    "allow_all_policy",
    "canonical_json",
    "definition_digests",
    "full_definition_digest",
    "lint_policy",
    "load_policy",
    "parse_policy",
]
