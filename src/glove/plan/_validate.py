"""Judging a decoded plan against the owner's local policy (sans-IO).

Every rule is checked and every problem is reported, each with its JSON path, so a controller
fixes a plan in one round trip:

* the harness id names a ``[harnesses.<id>]`` table;
* every exposure alias exists in the registry and is not revoked (its generation travels on
  in the :class:`ValidatedPlan`; the launch re-checks it against the pinned descriptor);
* all six limits are present (the Sage six-limit contract), each at most the owner's local
  maximum (a limit with no maximum is refused), and each enforceable here at whole-sandbox
  strength, or by a per-process mechanism the owner accepted for it (as ``glove exec
  --accept-weaker`` does); a limit with no mechanism at all is refused;
* the network mode and the terminal kind are offered here; in ``proxy`` mode every allow
  rule of the plan lies inside one of the owner's (``LocalPolicy.egress_allow``: a plan can
  only narrow), and the effective rules are ``narrow(local, plan)``.

The plan is first re-decoded from its own canonical bytes, so the digests always describe
exactly the plan that is judged, even one built by hand rather than by :func:`decode_plan`.
"""

from __future__ import annotations

from typing import Final

import msgspec

from glove.container import (
    MECH_CGROUP_V1_CPU_CFS,
    MECH_CGROUP_V1_CPUACCT,
    MECH_CGROUP_V1_MEMORY,
    MECH_CGROUP_V1_PIDS,
    MECH_CGROUP_V2_CPU,
    MECH_CGROUP_V2_CPU_MAX,
    MECH_CGROUP_V2_MEMORY,
    MECH_CGROUP_V2_PIDS,
    MECH_PIPE_ACCOUNTING,
    MECH_RLIMIT_AS,
    MECH_RLIMIT_CPU,
    MECH_RLIMIT_FSIZE,
    MECH_RLIMIT_NPROC_USER,
    MECH_RLIMIT_NPROC_USERNS,
    MECH_TMPFS_SIZE,
    MECH_WATCHDOG,
    MECH_WATCHDOG_PGROUP,
    MIN_DISK_BYTES,
    MIN_MEMORY_BYTES,
    MIN_PIDS,
    HostLimitSupport,
    Limits,
    plan_limits,
)
from glove.container.errors import LimitRefused, SandboxError
from glove.egress import RuleSet, narrow
from glove.egress.errors import RuleError
from glove.plan._canonical import canonical_bytes
from glove.plan._decode import capped, decode_plan
from glove.plan._digest import plan_digests
from glove.plan._model import (
    CONTAINER_LIMIT_NAMES,
    PLAN_LIMIT_NAMES,
    ExposurePolicy,
    LocalPolicy,
    Plan,
    ProxyNetwork,
    ResolvedProjection,
    ValidatedPlan,
    network_mode,
)
from glove.plan.errors import PlanError, PlanProblem

#: Whether each glove.container mechanism bounds the whole sandbox tree (True) or only each
#: process, or a process group a descendant can leave (False). A name not here is weaker.
FULL_MECHANISMS: Final[dict[str, bool]] = {
    MECH_WATCHDOG: True,
    MECH_PIPE_ACCOUNTING: True,
    MECH_TMPFS_SIZE: True,
    MECH_CGROUP_V1_MEMORY: True,
    MECH_CGROUP_V1_PIDS: True,
    MECH_CGROUP_V1_CPUACCT: True,
    MECH_CGROUP_V2_MEMORY: True,
    MECH_CGROUP_V2_PIDS: True,
    MECH_CGROUP_V2_CPU: True,
    MECH_CGROUP_V2_CPU_MAX: True,  # the CPU rate (not a plan limit: plan v1 has none)
    MECH_CGROUP_V1_CPU_CFS: True,
    MECH_RLIMIT_NPROC_USERNS: True,
    MECH_RLIMIT_AS: False,
    MECH_RLIMIT_CPU: False,
    MECH_WATCHDOG_PGROUP: False,
    MECH_RLIMIT_NPROC_USER: False,
    MECH_RLIMIT_FSIZE: False,
}
#: A value of each limit that any mechanism accepts, used only to ask which mechanism exists.
_PROBE_VALUES: Final[dict[str, float | int]] = {
    "wall_time": 1.0,
    "cpu_time": 1.0,
    "memory": MIN_MEMORY_BYTES,
    "pids": MIN_PIDS,
    "disk": MIN_DISK_BYTES,
    "output": 0,
}


def mechanism_is_full(mechanism: str) -> bool:
    """Whether ``mechanism`` (a glove.container name) bounds the whole sandbox tree; an
    unknown name is not (fail closed)."""
    return FULL_MECHANISMS.get(mechanism, False)


def host_mechanisms(host: HostLimitSupport) -> dict[str, str | None]:
    """The best mechanism ``host`` has for each plan limit (whole-sandbox ones first), or
    None where it has none: what gloved puts in :attr:`LocalPolicy.mechanisms`."""
    found: dict[str, str | None] = {}
    for name in PLAN_LIMIT_NAMES:
        container_name = CONTAINER_LIMIT_NAMES[name]
        single = msgspec.structs.replace(
            Limits(), **{container_name: _PROBE_VALUES[container_name]}
        )
        try:
            found[name] = plan_limits(single, host, frozenset({"all"}))[container_name].mechanism
        except LimitRefused:
            found[name] = None
    return found


def validate_plan(plan: Plan, local: LocalPolicy) -> ValidatedPlan:
    """Judge ``plan`` against ``local``; return it with its canonical bytes, digests, harness,
    resolved exposures, container limits and mechanisms.

    Raises:
        PlanError: any rule of the module docstring fails; ``problems`` lists every failure
            with its JSON path. Also a hand-built plan that decoding would refuse.
    """
    canonical = canonical_bytes(plan)
    plan = decode_plan(canonical)  # what the digests describe, structure checked again
    problems: list[PlanProblem] = []
    harness = local.harnesses.get(plan.harness)
    if harness is None:
        problems.append(
            PlanProblem.at(
                "$.harness",
                f"no harness {plan.harness!r} here (gloved.toml has no "
                f"[harnesses.{plan.harness}] table)",
            )
        )
    exposures = _exposures(plan, local, problems)
    projections = _projections(plan, local, problems)
    mechanisms = _limits(plan, local, problems)
    mode = network_mode(plan.network)
    egress: RuleSet | None = None
    if mode not in local.networks:
        problems.append(PlanProblem.at("$.network", f"network mode {mode!r} is not offered here"))
    elif isinstance(plan.network, ProxyNetwork):
        egress = _egress(plan.network, local, problems)
    if plan.terminal not in local.terminals:
        problems.append(
            PlanProblem.at("$.terminal", f"terminal {plan.terminal!r} is not offered here")
        )
    if problems or harness is None:
        raise PlanError(capped(problems))
    try:
        limits = plan.limits.to_container()
    except SandboxError as exc:  # unreachable for a decoded plan: its bounds are the floors
        raise PlanError.one("$.limits", str(exc)) from exc
    return ValidatedPlan(
        plan=plan,
        canonical=canonical,
        digests=plan_digests(canonical),
        harness=harness,
        exposures=exposures,
        limits=limits,
        mechanisms=mechanisms,
        egress=egress,
        projections=projections,
    )


def _projections(
    plan: Plan, local: LocalPolicy, problems: list[PlanProblem]
) -> tuple[ResolvedProjection, ...]:
    """Each projection's alias has a target here, and its bundle is in the library store
    with the size the plan says."""
    resolved: list[ResolvedProjection] = []
    for index, projection in enumerate(plan.projection_list):
        path = f"$.projections[{index}]"
        target = local.projections.get(projection.alias)
        if target is None:
            problems.append(
                PlanProblem.at(
                    f"{path}.alias",
                    f"no projection alias {projection.alias!r} here (gloved.toml has no "
                    f"[projections.{projection.alias}] table)",
                )
            )
            continue
        if local.library is None:
            problems.append(PlanProblem.at(path, "this gloved has no library store"))
            continue
        if projection.digest not in local.library:
            problems.append(
                PlanProblem.at(
                    f"{path}.digest",
                    f"no bundle {projection.digest} in the library (glove library add FILE)",
                )
            )
            continue
        stored = local.library[projection.digest]
        if stored is not None and stored != projection.size:
            problems.append(
                PlanProblem.at(
                    f"{path}.size",
                    f"bundle {projection.digest} is {stored} bytes, not {projection.size}",
                )
            )
            continue
        resolved.append(
            ResolvedProjection(
                alias=projection.alias,
                target=target,
                digest=projection.digest,
                size=projection.size,
            )
        )
    return tuple(resolved)


def _egress(network: ProxyNetwork, local: LocalPolicy, problems: list[PlanProblem]) -> RuleSet:
    """The rules the proxy runs with; a plan allow rule outside the owner's is a problem."""
    own = local.egress_rules()
    plan_rules = RuleSet.load(network.allow, network.deny_rules)  # loaded once when decoded
    for index, rule in enumerate(plan_rules.allow):
        try:
            narrow(own, RuleSet(allow=(rule,)))
        except RuleError as exc:
            where = f"$.network.allow[{index}]"
            problems.append(PlanProblem.at(where, f"{exc} (a plan can only narrow it)"))
    if problems:
        return RuleSet()
    return narrow(own, plan_rules)


def _exposures(
    plan: Plan, local: LocalPolicy, problems: list[PlanProblem]
) -> dict[str, ExposurePolicy]:
    resolved: dict[str, ExposurePolicy] = {}
    for index, alias in enumerate(plan.exposures):
        path = f"$.exposures[{index}]"
        entry = local.exposures.get(alias)
        if entry is None:
            problems.append(
                PlanProblem.at(
                    path, f"no exposure {alias!r} here (the owner creates it: glove init {alias})"
                )
            )
        elif entry.revoked:
            problems.append(
                PlanProblem.at(
                    path,
                    f"exposure {alias!r} was revoked (generation {entry.generation}); it is "
                    "usable again only once the owner re-creates it",
                )
            )
        else:
            resolved[alias] = entry
    return resolved


def _limits(plan: Plan, local: LocalPolicy, problems: list[PlanProblem]) -> dict[str, str]:
    chosen: dict[str, str] = {}
    for name in PLAN_LIMIT_NAMES:
        path = f"$.limits.{name}"
        value = getattr(plan.limits, name)
        if value is msgspec.UNSET:
            problems.append(
                PlanProblem.at(
                    path,
                    f"missing: a plan sets all six limits ({', '.join(PLAN_LIMIT_NAMES)}), "
                    "the Sage six-limit contract",
                )
            )
            continue
        maximum = local.limits_max.get(name)
        if maximum is None:
            problems.append(
                PlanProblem.at(
                    path, f"the owner set no local maximum for {name} (gloved.toml [limits])"
                )
            )
        elif value > maximum:
            problems.append(PlanProblem.at(path, f"{value} is above the local maximum {maximum}"))
        mechanism = local.mechanisms.get(name)
        if mechanism is None:
            problems.append(
                PlanProblem.at(path, f"this host has no mechanism that can enforce {name}")
            )
        elif not mechanism_is_full(mechanism) and not (
            name in local.accept_weaker or "all" in local.accept_weaker
        ):
            problems.append(
                PlanProblem.at(
                    path,
                    f"this host enforces {name} only per process ({mechanism}), not for the "
                    "whole sandbox, and the owner has not accepted that (accept_weaker)",
                )
            )
        else:
            chosen[name] = mechanism
    return chosen
