"""The policy engine: which tools are visible and which calls may be forwarded.

Pure and sans-IO. A :class:`Policy` is built from text by :func:`parse_policy` (the file
adapter is :func:`glove.policy.load_policy`) and then answers two questions, each with a
:class:`Decision` that carries a reason:

* :meth:`Policy.check_tool`: may the agent see this tool in ``tools/list``?
* :meth:`Policy.check_call`: may this ``tools/call`` be forwarded upstream?

and the same for the other MCP features (``docs/policy.md``): :meth:`Policy.check_prompt`
and :meth:`Policy.check_prompt_get` (``[[prompts]]``, the same rule language as tools),
:meth:`Policy.check_resource` (``[[resources]]``: URIs by exact value, glob, prefix or
``file://`` path containment) and :meth:`Policy.check_feature` (``[[features]]``:
logging, completion and the server-to-client requests, per upstream).

Deny by default: a tool no rule names is refused. ``check_call`` repeats every check of
``check_tool`` before the argument rules, so a call is judged on its own whatever the list
showed. Neither method raises: anything the engine cannot judge is a denial.
"""

from collections.abc import Mapping

import msgspec

from glove.policy._compile import Sections, compile_sections
from glove.policy._names import glob_match, is_valid_tool_name
from glove.policy._pin import ToolDefinition, definition_digests, full_definition_digest
from glove.policy._resources import MAX_URI_CHARS, FeatureRule, ResourceRule
from glove.policy._rules import ToolRule

__all__ = [
    "ALLOW_ALL",
    "ALLOW_ALL_TEXT",
    "MAX_SHOWN_NAME_CHARS",
    "Decision",
    "Policy",
    "allow_all_policy",
    "parse_policy",
]

MAX_SHOWN_NAME_CHARS = 80
"""Longest excerpt of an agent-supplied name quoted in a reason, in characters."""


class Decision(msgspec.Struct, frozen=True):
    """The outcome of one policy check.

    Attributes:
        allowed: whether the tool may be listed / the call forwarded.
        reason: a sentence for operators and audit records: which rule decided and why.
            It never quotes argument values.
        rule: the deciding rule's ``id`` or ``tools[N]``; ``None`` when no rule matched
            (default deny) or the name was invalid.
        inspected: JSON pointer -> value of each argument field the policy looked at
            (``check_call`` only). Long values and ``audit = "digest"`` fields are recorded
            as ``"sha256:<hex>"``; ``audit = "omit"`` fields are left out.
    """

    allowed: bool
    reason: str
    rule: str | None = None
    inspected: dict[str, object] = msgspec.field(default_factory=dict)


def _show(name: object) -> str:
    """Quote an agent-supplied name, cut to a readable length."""
    text = repr(name)
    if len(text) > MAX_SHOWN_NAME_CHARS:
        return text[: MAX_SHOWN_NAME_CHARS - 3] + "..."
    return text


class Policy:
    """A compiled policy. Immutable, thread-safe, and free of I/O.

    Build one with :func:`parse_policy` or :func:`glove.policy.load_policy`.
    """

    __slots__ = (
        "_exact",
        "_features",
        "_globs",
        "_prompts",
        "_resources",
        "_resources_exact",
        "digest",
        "source",
    )

    def __init__(
        self,
        exact: dict[str, ToolRule],
        globs: tuple[ToolRule, ...],
        digest: str,
        source: str,
        *,
        sections: Sections | None = None,
    ) -> None:
        """Wrap compiled rules (use :func:`parse_policy` rather than calling this).

        Raises:
            Nothing.
        """
        self._exact = dict(exact)
        self._globs = globs
        self.digest = f"sha256:{digest}"
        self.source = source
        self._prompts: Policy | None = None
        self._resources_exact: dict[str, ResourceRule] = {}
        self._resources: tuple[ResourceRule, ...] = ()
        self._features: tuple[FeatureRule, ...] = ()
        if sections is not None:
            prompt_exact, prompt_globs = sections.prompts
            self._prompts = Policy(prompt_exact, prompt_globs, digest, source)
            self._resources_exact = dict(sections.resources_exact)
            self._resources = sections.resources
            self._features = sections.features

    def __repr__(self) -> str:
        """Name the source and the digest."""
        return f"Policy(source={self.source!r}, digest={self.digest!r})"

    def rules(self) -> tuple[ToolRule, ...]:
        """Every rule: the exact ones, then the globs in file order.

        Raises:
            Nothing.
        """
        return (*self._exact.values(), *self._globs)

    def rule_for(self, name: str) -> ToolRule | None:
        """The rule that decides for ``name``: exact first, else the first matching glob.

        Raises:
            Nothing.
        """
        rule = self._exact.get(name)
        if rule is not None:
            return rule
        for glob in self._globs:
            if glob_match(glob.name, name):
                return glob
        return None

    def _tool_decision(
        self, name: object, definition: ToolDefinition | None
    ) -> tuple[Decision | None, ToolRule | None]:
        """The denial for the tool itself, or ``(None, rule)`` when the tool may be used."""
        if not is_valid_tool_name(name):
            return Decision(False, f"tool name {_show(name)} is not a valid exposed name"), None
        assert isinstance(name, str)
        rule = self.rule_for(name)
        if rule is None:
            return Decision(False, f"no rule allows tool {name!r} (deny by default)"), None
        if not rule.allow:
            return Decision(False, f"tool {name!r} is denied by {rule.label}", rule.label), rule
        return self._pin_denial(name, rule, definition), rule

    @staticmethod
    def _pin_denial(
        name: str, rule: ToolRule, definition: ToolDefinition | None
    ) -> Decision | None:
        """The denial when a pinned definition is unknown or changed, else ``None``."""
        pins = (rule.description_sha256, rule.schema_sha256, rule.definition_sha256)
        if pins == (None, None, None):
            return None
        if definition is None:
            reason = f"tool {name!r} is pinned by {rule.label} but its definition is unknown"
            return Decision(False, reason, rule.label)
        try:
            description, schema = definition_digests(definition)
            whole = full_definition_digest(definition) if rule.definition_sha256 else None
        except (TypeError, RecursionError):
            reason = f"tool {name!r} is pinned by {rule.label} but its definition is not JSON"
            return Decision(False, reason, rule.label)
        for key, pinned, actual in (
            ("description_sha256", rule.description_sha256, description),
            ("schema_sha256", rule.schema_sha256, schema),
            ("definition_sha256", rule.definition_sha256, whole),
        ):
            if pinned is not None and pinned != actual:
                reason = (
                    f"tool {name!r} changed: its definition no longer matches "
                    f"{key} pinned by {rule.label}"
                )
                return Decision(False, reason, rule.label)
        return None

    def check_tool(self, name: str, definition: ToolDefinition | None = None) -> Decision:
        """Whether ``name`` may appear in the agent's ``tools/list``.

        Args:
            name: the exposed name ``<upstream_id>__<tool>``.
            definition: the definition the upstream advertises now (needed for pins).

        Raises:
            Nothing: an internal failure is reported as a denial.
        """
        try:
            denial, rule = self._tool_decision(name, definition)
            if denial is not None:
                return denial
            assert rule is not None
            return Decision(True, f"tool {name!r} is allowed by {rule.label}", rule.label)
        except Exception as exc:  # noqa: BLE001 - fail closed: any bug is a denial, not a crash
            return Decision(False, f"internal error while checking the policy ({exc!r:.80})")

    def check_call(
        self, name: str, arguments: object, definition: ToolDefinition | None = None
    ) -> Decision:
        """Whether a ``tools/call`` of ``name`` with ``arguments`` may be forwarded.

        Repeats :meth:`check_tool` (rule, effect, pins), then applies the rule's argument
        rules in order; the first that fails decides.

        Args:
            name: the exposed name ``<upstream_id>__<tool>``.
            arguments: the decoded ``params.arguments``: a mapping, or ``None`` for none.
            definition: the definition the upstream advertises now (needed for pins).

        Raises:
            Nothing: an internal failure is reported as a denial.
        """
        inspected: dict[str, object] = {}
        rule: ToolRule | None = None
        try:
            denial, rule = self._tool_decision(name, definition)
            if denial is not None:
                return denial
            assert rule is not None
            if arguments is None:
                arguments = {}
            if not isinstance(arguments, Mapping):
                reason = f"call to {name!r} denied by {rule.label}: arguments are not an object"
                return Decision(False, reason, rule.label)
            if rule.strict_args:
                for key in arguments:
                    if key not in rule.named_args:
                        reason = (
                            f"call to {name!r} denied by {rule.label}: argument "
                            f"{_show(key)} is not named by any rule (strict_args)"
                        )
                        return Decision(False, reason, rule.label)
            for arg in rule.args:
                problem = arg.evaluate(arguments, inspected)
                if problem is not None:
                    reason = (
                        f"call to {name!r} denied by {arg.label}: "
                        f"argument {arg.pointer!r} ({arg.op}) {problem}"
                    )
                    return Decision(False, reason, rule.label, inspected)
            return Decision(
                True, f"call to {name!r} is allowed by {rule.label}", rule.label, inspected
            )
        except Exception as exc:  # noqa: BLE001 - fail closed: any bug is a denial, not a crash
            reason = f"internal error while checking the policy ({exc!r:.80})"
            return Decision(False, reason, rule.label if rule else None, inspected)

    # -- prompts, resources, features -------------------------------------------------------

    def allows_any(self, section: str) -> bool:
        """Whether some rule of ``section`` (``tools``, ``prompts``, ``resources``,
        ``features``) can allow anything: what a mediator advertises hangs on it.

        Raises:
            Nothing.
        """
        if section == "tools":
            return any(rule.allow for rule in self.rules())
        if section == "prompts":
            return self._prompts is not None and self._prompts.allows_any("tools")
        if section == "resources":
            rules = (*self._resources_exact.values(), *self._resources)
            return any(rule.allow for rule in rules)
        return any(rule.allow for rule in self._features)

    def check_prompt(self, name: str, definition: ToolDefinition | None = None) -> Decision:
        """Whether prompt ``name`` (exposed) may appear in the agent's ``prompts/list``.

        ``[[prompts]]`` rules work exactly as ``[[tools]]`` rules; a pinned prompt's
        ``schema_sha256`` covers its ``arguments`` list (as ``{"arguments": [...]}``).

        Raises:
            Nothing: an internal failure is reported as a denial.
        """
        if self._prompts is None:
            return Decision(False, f"no rule allows prompt {_show(name)} (deny by default)")
        return _as_prompt(self._prompts.check_tool(name, definition))

    def check_prompt_get(
        self, name: str, arguments: object, definition: ToolDefinition | None = None
    ) -> Decision:
        """Whether a ``prompts/get`` of ``name`` with ``arguments`` may be forwarded.

        Raises:
            Nothing: an internal failure is reported as a denial.
        """
        if self._prompts is None:
            return Decision(False, f"no rule allows prompt {_show(name)} (deny by default)")
        return _as_prompt(self._prompts.check_call(name, arguments, definition))

    def resource_rule_for(self, uri: str, upstream: str, upstream_uri: str) -> ResourceRule | None:
        """The rule that decides for a resource: an exact ``uri`` first, else the first
        ``uri`` glob, ``prefix`` or ``roots`` rule in file order that covers it.

        Raises:
            Nothing.
        """
        rule = self._resources_exact.get(uri)
        if rule is not None:
            return rule
        for candidate in self._resources:
            if candidate.matches(uri, upstream, upstream_uri):
                return candidate
        return None

    def check_resource(self, uri: str, *, upstream: str, upstream_uri: str) -> Decision:
        """Whether resource ``uri`` (as exposed) of ``upstream`` may be listed, read and
        subscribed to; ``upstream_uri`` is the URI as the upstream itself names it.

        A resource template is judged on its ``uriTemplate`` text for listing; every read
        is judged again on the concrete URI.

        Raises:
            Nothing: an internal failure is reported as a denial.
        """
        try:
            if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_CHARS:
                return Decision(False, "resource URI is empty, too long or not a string")
            rule = self.resource_rule_for(uri, upstream, upstream_uri)
            if rule is None:
                return Decision(False, f"no rule allows resource {_show(uri)} (deny by default)")
            if not rule.allow:
                return Decision(
                    False, f"resource {_show(uri)} is denied by {rule.label}", rule.label
                )
            return Decision(True, f"resource {_show(uri)} is allowed by {rule.label}", rule.label)
        except Exception as exc:  # noqa: BLE001 - fail closed: any bug is a denial, not a crash
            return Decision(False, f"internal error while checking the policy ({exc!r:.80})")

    def check_feature(self, upstream: str, feature: str) -> Decision:
        """Whether ``upstream`` may use ``feature`` (``logging``, ``completion``,
        ``sampling``, ``elicitation`` or ``roots``).

        Raises:
            Nothing: an internal failure is reported as a denial.
        """
        for rule in self._features:
            if feature in rule.allow and rule.covers(upstream):
                return Decision(
                    True,
                    f"{feature} for upstream {upstream!r} is allowed by {rule.label}",
                    rule.label,
                )
        return Decision(
            False,
            f"no rule allows {_show(feature)} for upstream {_show(upstream)} (deny by default)",
        )


def _as_prompt(decision: Decision) -> Decision:
    """Reword a decision of the tool engine for a prompt."""
    reason = decision.reason.replace("tool ", "prompt ", 1).replace("call to ", "get of ", 1)
    reason = reason.replace("tools[", "prompts[")
    return msgspec.structs.replace(decision, reason=reason)


def parse_policy(text: str | bytes, source: str = "<policy>") -> Policy:
    """Build a :class:`Policy` from policy TOML text.

    Args:
        text: the policy file's content.
        source: a name for messages (the file path when loaded from disk).

    Raises:
        PolicyFileError: the text is too large, not TOML, or not a valid policy; the message
            names the key path at fault, e.g. ``tools[2].args[0].opp: unknown key``.
    """
    sections = compile_sections(text, source)
    exact, globs = sections.tools
    return Policy(exact, globs, sections.digest, source, sections=sections)


ALLOW_ALL = "allow-all"
"""The name of the built-in policy that allows every tool, prompt, resource and feature."""

ALLOW_ALL_TEXT = """\
# The built-in "allow-all" policy: every feature is forwarded (and still audited).
version = 1

[[tools]]
id = "allow-all.tools"
name = "*"

[[prompts]]
id = "allow-all.prompts"
name = "*"

[[resources]]
id = "allow-all.resources"
uri = "*"

[[features]]
id = "allow-all.features"
upstream = "*"
allow = ["logging", "completion", "sampling", "elicitation", "roots"]
"""


def allow_all_policy() -> Policy:
    """The built-in ``allow-all`` policy, for trusted setups and tests.

    Its digest is that of :data:`ALLOW_ALL_TEXT`, so audit records name it.

    Raises:
        Nothing.
    """
    return parse_policy(ALLOW_ALL_TEXT, source=ALLOW_ALL)
