"""Plan v1 and the owner's local policy, as frozen msgspec Structs (sans-IO).

A plan is identifier-only JSON: it names a harness, exposure aliases, six limits, a network
mode and a terminal, and nothing that reaches the host directly (no argv, no path, no
environment). The owner's :class:`LocalPolicy` (filled by gloved from ``gloved.toml`` and its
exposure registry) says what those identifiers mean here and how far a plan may go.

Optional plan fields default to ``UNSET`` rather than a value, so a decoded plan re-encodes to
exactly the members it was sent with and its canonical bytes are those of the input.

``network`` is the string ``"none"``, or an object tagged by ``"mode"`` for a mode with
parameters: ``{"mode": "proxy", "allow": ["HOST[:PORTS][+OPTION]", ...], "deny": [...]}``
(:class:`ProxyNetwork`, the egress rules of ``docs/egress.md``; ``deny`` optional). Every plan
that decoded before still decodes, canonicalizes and digests exactly as it did.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal, TypeVar

import msgspec
from msgspec import UNSET, Meta, UnsetType

from glove.container import MIN_DISK_BYTES, MIN_MEMORY_BYTES, MIN_PIDS, Limits
from glove.egress import RuleSet
from glove.egress.errors import RuleError
from glove.evaluate import MAX_FIXTURE_BYTES
from glove.plan._digest import PlanDigests
from glove.plan.errors import LocalPolicyError

#: Largest plan accepted, in bytes of JSON text (checked before parsing).
MAX_PLAN_BYTES: Final = 64 * 1024
#: Deepest nesting of arrays and objects accepted in a plan's JSON text.
MAX_PLAN_DEPTH: Final = 64
#: The plan format version this package reads.
PLAN_VERSION: Final = 1
#: Most exposure aliases one plan may name.
MAX_EXPOSURES: Final = 32
#: Most labels one plan may carry, and the longest label key and value, in characters.
MAX_LABELS: Final = 16
MAX_LABEL_KEY_CHARS: Final = 64
MAX_LABEL_VALUE_CHARS: Final = 128
#: Terminal size bounds, in character cells.
MIN_TERMINAL_CELLS: Final = 1
MAX_TERMINAL_CELLS: Final = 1000
#: Largest integer a plan may carry: RFC 8785 numbers are IEEE-754 doubles, and above
#: 2**53 - 1 a canonical encoding would no longer be the number that was sent.
MAX_SAFE_INTEGER: Final = 2**53 - 1
#: Longest time limit a plan may ask for, in seconds (a year; the local maxima are lower).
MAX_PLAN_SECONDS: Final = 366 * 24 * 3600.0

#: Longest identifier (a harness id or an exposure alias), in characters.
MAX_IDENTIFIER_CHARS: Final = 64
#: An identifier: 1-64 lowercase ASCII letters, digits, _ and -, not starting with _ or -.
IDENTIFIER_RE: Final = re.compile(rf"[a-z0-9][a-z0-9_-]{{0,{MAX_IDENTIFIER_CHARS - 1}}}", re.ASCII)
IDENTIFIER_PATTERN: Final = IDENTIFIER_RE.pattern
#: A label key: a name a controller uses for its own bookkeeping (no path separators).
LABEL_KEY_RE: Final = re.compile(
    rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_LABEL_KEY_CHARS - 1}}}", re.ASCII
)

#: The six plan limit names (the Sage six-limit contract), in the order reports list them.
PLAN_LIMIT_NAMES: Final = (
    "wall_time_s",
    "cpu_time_s",
    "memory_bytes",
    "pids",
    "disk_bytes",
    "output_bytes",
)
#: Each plan limit name and the glove.container.Limits field it becomes.
CONTAINER_LIMIT_NAMES: Final = {
    "wall_time_s": "wall_time",
    "cpu_time_s": "cpu_time",
    "memory_bytes": "memory",
    "pids": "pids",
    "disk_bytes": "disk",
    "output_bytes": "output",
}

#: Most projections one plan may carry.
MAX_PROJECTIONS: Final = 16
#: A projection's digest: ``sha256:`` and 64 lower-case hex digits (a library bundle's).
PROJECTION_DIGEST_RE: Final = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)

#: Most allow (and most deny) rules one plan may carry, and the longest rule, in characters.
MAX_NETWORK_RULES: Final = 64
MAX_NETWORK_RULE_CHARS: Final = 300

Seconds = Annotated[float, Meta(gt=0, le=MAX_PLAN_SECONDS)]
NetworkRule = Annotated[str, Meta(min_length=1, max_length=MAX_NETWORK_RULE_CHARS)]
NetworkRules = Annotated[tuple[NetworkRule, ...], Meta(max_length=MAX_NETWORK_RULES)]
Cells = Annotated[int, Meta(ge=MIN_TERMINAL_CELLS, le=MAX_TERMINAL_CELLS)]
Terminal = Literal["pipes", "pty"]


_T = TypeVar("_T")


def _given(value: _T | UnsetType) -> _T | None:
    return None if isinstance(value, UnsetType) else value


class PlanLimits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The six limits a plan asks for. Each may be absent when decoded; validation refuses a
    plan that leaves one out (the six-limit contract), so the refusal names every missing one.

    Attributes:
        wall_time_s: wall-clock seconds for the whole session.
        cpu_time_s: CPU seconds, summed over the sandbox tree where the mechanism allows.
        memory_bytes: bytes of memory (at least 4 MiB).
        pids: tasks alive at once, the sandbox's init included (at least 2).
        disk_bytes: bytes of writable scratch (at least 64 KiB).
        output_bytes: bytes of stdout plus stderr (or terminal output) passed on.
    """

    wall_time_s: Seconds | UnsetType = UNSET
    cpu_time_s: Seconds | UnsetType = UNSET
    memory_bytes: Annotated[int, Meta(ge=MIN_MEMORY_BYTES, le=MAX_SAFE_INTEGER)] | UnsetType = UNSET
    pids: Annotated[int, Meta(ge=MIN_PIDS, le=MAX_SAFE_INTEGER)] | UnsetType = UNSET
    disk_bytes: Annotated[int, Meta(ge=MIN_DISK_BYTES, le=MAX_SAFE_INTEGER)] | UnsetType = UNSET
    output_bytes: Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)] | UnsetType = UNSET

    def to_container(self) -> Limits:
        """These limits as :class:`glove.container.Limits` (seconds and bytes; absent ones
        unlimited).

        Raises:
            SandboxError: a value no mechanism can apply (a hand-built value below a floor).
        """
        return Limits(
            wall_time=_given(self.wall_time_s),
            cpu_time=_given(self.cpu_time_s),
            memory=_given(self.memory_bytes),
            pids=_given(self.pids),
            disk=_given(self.disk_bytes),
            output=_given(self.output_bytes),
        )


class ProxyNetwork(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="mode", tag="proxy"
):
    """``"network": {"mode": "proxy", ...}``: the audited egress proxy, with these rules.

    A plan can only narrow the owner's local rules: each allow rule must lie inside one of
    the owner's (``LocalPolicy.egress_allow``), and both denylists apply.

    Attributes:
        allow: ``HOST[:PORTS][+OPTION...]`` rules (at most 64); empty reaches nothing.
        deny: ``HOST[:PORTS]`` rules (at most 64), optional.
    """

    allow: NetworkRules
    deny: NetworkRules | UnsetType = UNSET

    @property
    def deny_rules(self) -> tuple[str, ...]:
        """``deny``, empty when absent."""
        return () if isinstance(self.deny, UnsetType) else self.deny


#: The one evaluation kind plan v1 knows (``docs/evaluation.md``).
EVALUATION_KIND: Final = "refinement-eval-v1"
#: What a library digest looks like in a plan (``sha256:`` and 64 lower-case hex digits).
LIBRARY_DIGEST_PATTERN: Final = "^sha256:[0-9a-f]{64}$"


class FixtureRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``"fixture": {"digest": ..., "size": N}``: a library bundle, named by its content.

    Attributes:
        digest: ``sha256:<64 lower-case hex>`` of the fixture's exact bytes.
        size: its size in bytes (1 to the fixture DSL's 64 KiB).
    """

    digest: Annotated[str, Meta(pattern=LIBRARY_DIGEST_PATTERN)]
    size: Annotated[int, Meta(ge=1, le=MAX_FIXTURE_BYTES)]


class PlanEvaluation(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``"evaluation": {"kind": "refinement-eval-v1", "fixture": {...}}``: Glove judges the
    run from its raw terminal stream against the fixture (only with ``"terminal": "pty"``).

    Attributes:
        kind: ``refinement-eval-v1``.
        fixture: the fixture bundle in the owner's library (read by gloved, never mounted).
    """

    kind: Literal["refinement-eval-v1"]
    fixture: FixtureRef


#: A plan's network: the mode name ``"none"``, or the ``proxy`` object.
PlanNetwork = Literal["none"] | ProxyNetwork


def network_mode(network: PlanNetwork) -> str:
    """The mode name of a plan's network (``none`` or ``proxy``)."""
    return "proxy" if isinstance(network, ProxyNetwork) else network


class PlanProjection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One ``"projections"`` entry: a library bundle shown read-only at an alias's target.

    Attributes:
        alias: a ``[projections.ALIAS]`` table of gloved.toml (where the file appears).
        digest: the bundle's ``sha256:<64 hex>`` (the library names bundles by it).
        size: the bundle's size in bytes.
    """

    alias: str
    digest: str
    size: Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]


class Plan(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A decoded plan v1 (structure checked; not yet judged against local policy).

    Attributes:
        version: always 1.
        harness: the id of a ``[harnesses.<id>]`` table in the owner's gloved.toml.
        exposures: exposure aliases created with ``glove init`` (at most 32, no repeats).
        limits: the six limits.
        network: ``"none"``, or the :class:`ProxyNetwork` object.
        terminal: ``"pipes"`` (stdin/stdout/stderr) or ``"pty"``.
        rows: terminal rows, only with ``"pty"`` and together with ``cols``.
        cols: terminal columns, only with ``"pty"`` and together with ``rows``.
        labels: at most 16 short string pairs kept for the controller's own bookkeeping.
        evaluation: a refinement-eval-v1 evaluation of the run (a refinement plan), only
            with ``"terminal": "pty"``.
        projections: library bundles shown read-only in the sandbox (at most 16, each alias
            once), optional.
    """

    version: Literal[1]
    harness: str
    exposures: tuple[str, ...]
    limits: PlanLimits
    network: PlanNetwork
    terminal: Terminal
    rows: Cells | UnsetType = UNSET
    cols: Cells | UnsetType = UNSET
    labels: dict[str, str] | UnsetType = UNSET
    evaluation: PlanEvaluation | UnsetType = UNSET
    projections: tuple[PlanProjection, ...] | UnsetType = UNSET

    @property
    def projection_list(self) -> tuple[PlanProjection, ...]:
        """``projections``, empty when absent."""
        return () if isinstance(self.projections, UnsetType) else self.projections


class HarnessPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One ``[harnesses.<id>]`` table of gloved.toml: the only place a command line comes from.

    Attributes:
        argv: the command line, never from a plan.
        env: environment variables set for the harness, never from a plan.
        profile: the sandbox profile name, or None for the default.
    """

    argv: tuple[str, ...]
    env: dict[str, str] = msgspec.field(default_factory=dict)
    profile: str | None = None

    def __post_init__(self) -> None:
        """Refuse a harness with no command.

        Raises:
            LocalPolicyError: ``argv`` is empty.
        """
        if not self.argv:
            raise LocalPolicyError("a harness needs a non-empty argv")


class ExposurePolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One entry of the owner's exposure registry, as gloved knows it now.

    Attributes:
        generation: bumped by every revoke or re-create; the launch re-checks it against the
            pinned descriptor, so a plan validated against an older generation fails there.
        mode: ``ro`` or ``rw``.
        target: the absolute path inside the sandbox.
        revoked: the alias was revoked; a plan naming it is refused.
    """

    generation: int
    mode: Literal["ro", "rw"]
    target: str
    revoked: bool = False

    def __post_init__(self) -> None:
        """Refuse a record that could not have come from the registry.

        Raises:
            LocalPolicyError: a generation below 1, an unknown mode or a relative target.
        """
        if isinstance(self.generation, bool) or self.generation < 1:
            raise LocalPolicyError(f"an exposure generation starts at 1, got {self.generation!r}")
        if self.mode not in ("ro", "rw"):
            raise LocalPolicyError(f"an exposure mode is ro or rw, got {self.mode!r}")
        if not self.target.startswith("/"):
            raise LocalPolicyError(f"an exposure target is absolute, got {self.target!r}")


class LocalPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the owner allows here, filled by gloved from gloved.toml and its registry.

    Attributes:
        harnesses: harness id -> its table.
        exposures: alias -> its current registry entry.
        limits_max: each of the six plan limit names -> the largest value a plan may ask for;
            a limit with no maximum is refused (fail closed).
        mechanisms: each plan limit name -> the mechanism this host enforces it with
            (glove.container's names, e.g. ``cgroup-v1-memory``), or None for none at all; a
            missing name counts as None. See :func:`host_mechanisms`.
        accept_weaker: plan limit names (or ``"all"``) for which the owner accepts a
            per-process mechanism where no whole-sandbox one exists.
        networks: the network modes offered here (``proxy`` only with egress rules to
            narrow: a plan allow rule outside ``egress_allow`` is refused).
        terminals: the terminal kinds offered here.
        egress_allow: the owner's local egress allowlist (gloved.toml ``[network] allow``).
        egress_deny: the owner's local egress denylist (``[network] deny``), always applied.
        projections: each ``[projections.ALIAS]`` of gloved.toml -> its target in the sandbox.
        library: each entry of the library store with a bundle's name -> its size (None
            for one that is not a regular file: the launch refuses it with its own code),
            or None when this gloved has no library store (every projection is refused).
    """

    harnesses: dict[str, HarnessPolicy]
    exposures: dict[str, ExposurePolicy]
    limits_max: dict[str, int | float]
    mechanisms: dict[str, str | None]
    accept_weaker: frozenset[str] = frozenset()
    networks: frozenset[str] = frozenset({"none"})
    terminals: frozenset[str] = frozenset({"pipes"})
    egress_allow: tuple[str, ...] = ()
    egress_deny: tuple[str, ...] = ()
    projections: dict[str, str] = msgspec.field(default_factory=dict)
    library: dict[str, int | None] | None = None

    def egress_rules(self) -> RuleSet:
        """The owner's egress rules, loaded (checked when the policy was built)."""
        return RuleSet.load(self.egress_allow, self.egress_deny)

    def __post_init__(self) -> None:
        """Refuse names that are not plan limit names (a typo would silently loosen nothing,
        or tighten everything; either way the owner must hear about it).

        Raises:
            LocalPolicyError: an unknown limit name in ``limits_max``, ``mechanisms`` or
                ``accept_weaker``, or a local egress rule that does not load.
        """
        try:
            self.egress_rules()
        except RuleError as exc:
            raise LocalPolicyError(f"LocalPolicy egress rules: {exc}") from exc
        known = frozenset(PLAN_LIMIT_NAMES)
        for field, names in (
            ("limits_max", frozenset(self.limits_max)),
            ("mechanisms", frozenset(self.mechanisms)),
            ("accept_weaker", self.accept_weaker - {"all"}),
        ):
            unknown = names - known
            if unknown:
                raise LocalPolicyError(
                    f"LocalPolicy.{field} names unknown limits {sorted(unknown)}; "
                    f"the plan limit names are {', '.join(PLAN_LIMIT_NAMES)}"
                )


class ResolvedProjection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A plan's projection with the target its alias has here.

    Attributes:
        alias: the alias (gloved.toml ``[projections.ALIAS]``).
        target: the absolute file path inside the sandbox.
        digest: ``sha256:<64 hex>``.
        size: bytes.
    """

    alias: str
    target: str
    digest: str
    size: int


class ValidatedPlan(msgspec.Struct, frozen=True):
    """A plan that passed validation, with everything the lifecycle needs from it.

    Built only by :func:`glove.plan.validate_plan`.

    Attributes:
        plan: the plan as decoded.
        canonical: its RFC 8785 canonical bytes (what is persisted and digested).
        digests: SHA-256 and BLAKE3 of ``canonical``.
        harness: the owner's table for ``plan.harness``.
        exposures: each alias, in plan order -> its registry entry at validation time.
        limits: the six limits as glove.container.Limits (seconds and bytes).
        mechanisms: each plan limit name -> the mechanism that will enforce it.
        egress: in ``proxy`` mode, the rules the session's proxy runs with:
            ``narrow(local, plan)`` (the plan's allow rules, each inside the owner's, and
            both denylists); None in ``none`` mode.
        projections: each projection, in plan order, with its target.
    """

    plan: Plan
    canonical: bytes
    digests: PlanDigests
    harness: HarnessPolicy
    exposures: dict[str, ExposurePolicy]
    limits: Limits
    mechanisms: dict[str, str]
    egress: RuleSet | None = None
    projections: tuple[ResolvedProjection, ...] = ()

    @property
    def evaluation(self) -> PlanEvaluation | None:
        """The plan's evaluation (a refinement plan), or None (a resource plan)."""
        return _given(self.plan.evaluation)

    @property
    def terminal_size(self) -> tuple[int, int] | None:
        """``(rows, cols)`` when the plan asked for a pty of a given size, else None."""
        rows, cols = self.plan.rows, self.plan.cols
        if isinstance(rows, int) and isinstance(cols, int):
            return rows, cols
        return None
