"""The policy engine: which tools are visible and which calls may be forwarded.

Pure and sans-IO. A :class:`Policy` is built from text by :func:`parse_policy` (the file
adapter is :func:`glove.policy.load_policy`) and then answers two questions, each with a
:class:`Decision` that carries a reason:

* :meth:`Policy.check_tool`: may the agent see this tool in ``tools/list``?
* :meth:`Policy.check_call`: may this ``tools/call`` be forwarded upstream?

Deny by default: a tool no rule names is refused. ``check_call`` repeats every check of
``check_tool`` before the argument rules, so a call is judged on its own whatever the list
showed. Neither method raises: anything the engine cannot judge is a denial.
"""

from collections.abc import Mapping

import msgspec

from glove.policy._compile import compile_policy
from glove.policy._names import glob_match, is_valid_tool_name
from glove.policy._pin import ToolDefinition, definition_digests, full_definition_digest
from glove.policy._rules import ToolRule

__all__ = ["MAX_SHOWN_NAME_CHARS", "Decision", "Policy", "parse_policy"]

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

    __slots__ = ("_exact", "_globs", "digest", "source")

    def __init__(
        self, exact: dict[str, ToolRule], globs: tuple[ToolRule, ...], digest: str, source: str
    ) -> None:
        """Wrap compiled rules (use :func:`parse_policy` rather than calling this).

        Raises:
            Nothing.
        """
        self._exact = dict(exact)
        self._globs = globs
        self.digest = f"sha256:{digest}"
        self.source = source

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


def parse_policy(text: str | bytes, source: str = "<policy>") -> Policy:
    """Build a :class:`Policy` from policy TOML text.

    Args:
        text: the policy file's content.
        source: a name for messages (the file path when loaded from disk).

    Raises:
        PolicyFileError: the text is too large, not TOML, or not a valid policy; the message
            names the key path at fault, e.g. ``tools[2].args[0].opp: unknown key``.
    """
    exact, globs, digest = compile_policy(text, source)
    return Policy(exact, globs, digest, source)
