"""validate_plan against LocalPolicy: every rule, all problems collected, the ValidatedPlan."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest

import glove.container._limits as container_limits
from glove.container import HostLimitSupport, Limits
from glove.container._limits import _candidates
from glove.plan import (
    PLAN_LIMIT_NAMES,
    ExposurePolicy,
    HarnessPolicy,
    LocalPolicy,
    LocalPolicyError,
    Plan,
    PlanError,
    PlanLimits,
    PlanProblem,
    ValidatedPlan,
    canonical_bytes,
    decode_plan,
    host_mechanisms,
    mechanism_is_full,
    plan_digests,
    validate_plan,
)
from glove.plan._validate import FULL_MECHANISMS

from ._helpers import limits, local_policy, plan_bytes


def problems_of(data: bytes, local: LocalPolicy) -> list[PlanProblem]:
    """The problems validation refuses the plan ``data`` with (it must refuse)."""
    plan = decode_plan(data)
    with pytest.raises(PlanError) as caught:
        validate_plan(plan, local)
    return caught.value.problems


def paths_of(data: bytes, local: LocalPolicy) -> list[str]:
    """The paths of the problems validation refuses ``data`` with."""
    return [problem.path for problem in problems_of(data, local)]


# --- a valid plan ------------------------------------------------------------------------------


def test_the_example_validates_with_everything_the_lifecycle_needs() -> None:
    """The ValidatedPlan carries the plan, its canonical bytes and digests, the harness, the
    resolved exposures, container Limits in seconds and bytes, and each limit's mechanism."""
    local = local_policy()
    plan = decode_plan(plan_bytes())
    validated = validate_plan(plan, local)
    assert isinstance(validated, ValidatedPlan)
    assert validated.plan == plan
    assert validated.canonical == canonical_bytes(plan)
    assert validated.digests == plan_digests(validated.canonical)
    assert validated.harness == local.harnesses["demo"]
    assert validated.exposures == {"work": local.exposures["work"]}
    assert validated.exposures["work"].generation == 4
    assert validated.limits == Limits(
        wall_time=30.0,
        cpu_time=10.0,
        memory=268435456,
        pids=64,
        disk=67108864,
        output=1048576,
    )
    assert validated.mechanisms == {
        "wall_time_s": "watchdog",
        "cpu_time_s": "cgroup-v1-cpuacct-watchdog",
        "memory_bytes": "cgroup-v1-memory",
        "pids": "cgroup-v1-pids",
        "disk_bytes": "tmpfs-size",
        "output_bytes": "pipe-accounting",
    }
    assert validated.terminal_size is None


def test_exposures_resolve_in_plan_order_and_a_pty_size_is_kept() -> None:
    """Aliases map to their registry entries in the order the plan names them."""
    data = plan_bytes(exposures=["ref", "work"], terminal="pty", rows=50, cols=132)
    validated = validate_plan(decode_plan(data), local_policy())
    assert list(validated.exposures) == ["ref", "work"]
    assert validated.exposures["ref"].mode == "ro"
    assert validated.terminal_size == (50, 132)


def test_a_limit_equal_to_the_maximum_is_accepted() -> None:
    """The local maximum is inclusive."""
    data = plan_bytes(limits=limits(memory_bytes=2**32, wall_time_s=3600))
    assert validate_plan(decode_plan(data), local_policy()).limits.memory == 2**32


# --- each rule ---------------------------------------------------------------------------------


def test_an_unknown_harness_is_refused() -> None:
    """A harness id with no [harnesses.<id>] table is refused at $.harness."""
    assert problems_of(plan_bytes(harness="other"), local_policy()) == [
        PlanProblem(
            path="$.harness",
            message="no harness 'other' here (gloved.toml has no [harnesses.other] table)",
        )
    ]


def test_an_unknown_exposure_is_refused() -> None:
    """An alias the registry does not hold is refused at its index."""
    problems = problems_of(plan_bytes(exposures=["work", "nope"]), local_policy())
    assert problems == [
        PlanProblem(
            path="$.exposures[1]",
            message="no exposure 'nope' here (the owner creates it: glove init nope)",
        )
    ]


def test_a_revoked_exposure_is_refused() -> None:
    """An alias whose registry entry is revoked is not current, and is refused."""
    problems = problems_of(plan_bytes(exposures=["gone"]), local_policy())
    assert problems[0].path == "$.exposures[0]"
    assert problems[0].message.startswith("exposure 'gone' was revoked (generation 2)")


@pytest.mark.parametrize("name", PLAN_LIMIT_NAMES)
def test_a_plan_without_one_limit_is_refused(name: str) -> None:
    """Each of the six limits is required (the Sage six-limit contract)."""
    problems = problems_of(plan_bytes(limits=limits(**{name: None})), local_policy())
    assert [problem.path for problem in problems] == [f"$.limits.{name}"]
    assert problems[0].message.startswith("missing: a plan sets all six limits")


def test_a_plan_with_no_limits_names_all_six() -> None:
    """Every missing limit is reported, not only the first."""
    assert paths_of(plan_bytes(limits={}), local_policy()) == [
        f"$.limits.{name}" for name in PLAN_LIMIT_NAMES
    ]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("wall_time_s", 3600.5),
        ("cpu_time_s", 4000),
        ("memory_bytes", 2**32 + 1),
        ("pids", 513),
        ("disk_bytes", 2**31),
        ("output_bytes", 2**24 + 1),
    ],
)
def test_a_limit_above_the_local_maximum_is_refused(name: str, value: float) -> None:
    """Each limit is bounded by the owner's maximum for it."""
    problems = problems_of(plan_bytes(limits=limits(**{name: value})), local_policy())
    assert [problem.path for problem in problems] == [f"$.limits.{name}"]
    assert "is above the local maximum" in problems[0].message


def test_a_limit_without_a_local_maximum_is_refused() -> None:
    """Fail closed: a limit the owner set no maximum for is refused, not unbounded."""
    local = local_policy(limits_max={"wall_time_s": 60})
    problems = problems_of(plan_bytes(), local)
    assert [problem.path for problem in problems] == [
        f"$.limits.{name}" for name in PLAN_LIMIT_NAMES if name != "wall_time_s"
    ]
    assert problems[0].message == (
        "the owner set no local maximum for cpu_time_s (gloved.toml [limits])"
    )


def test_a_limit_with_no_mechanism_here_is_refused() -> None:
    """A limit the host cannot enforce at all is refused, even if weaker ones are accepted."""
    local = local_policy(
        mechanisms={"memory_bytes": None, "wall_time_s": "watchdog"},
        accept_weaker=frozenset({"all"}),
    )
    problems = problems_of(plan_bytes(), local)
    assert [problem.path for problem in problems] == [
        f"$.limits.{name}" for name in PLAN_LIMIT_NAMES if name != "wall_time_s"
    ]
    assert problems[1].message == "this host has no mechanism that can enforce memory_bytes"


def test_a_weaker_mechanism_is_refused_unless_the_owner_accepts_it() -> None:
    """A per-process mechanism is refused; accepted by name or by "all", it is used."""
    mechanisms = {
        **local_policy().mechanisms,
        "memory_bytes": "rlimit-as-per-process",
        "cpu_time_s": "rlimit-cpu-per-process",
    }
    problems = problems_of(plan_bytes(), local_policy(mechanisms=mechanisms))
    assert [problem.path for problem in problems] == [
        "$.limits.cpu_time_s",
        "$.limits.memory_bytes",
    ]
    assert problems[1].message == (
        "this host enforces memory_bytes only per process (rlimit-as-per-process), not for "
        "the whole sandbox, and the owner has not accepted that (accept_weaker)"
    )
    one = local_policy(mechanisms=mechanisms, accept_weaker=frozenset({"memory_bytes"}))
    assert paths_of(plan_bytes(), one) == ["$.limits.cpu_time_s"]
    every = local_policy(mechanisms=mechanisms, accept_weaker=frozenset({"all"}))
    validated = validate_plan(decode_plan(plan_bytes()), every)
    assert validated.mechanisms["memory_bytes"] == "rlimit-as-per-process"


def test_an_unknown_mechanism_counts_as_weaker() -> None:
    """A mechanism name glove.container does not define is not trusted as whole-sandbox."""
    local = local_policy(mechanisms={**local_policy().mechanisms, "pids": "cgroup-v9-magic"})
    assert paths_of(plan_bytes(), local) == ["$.limits.pids"]


def test_a_network_mode_not_offered_here_is_refused() -> None:
    """``none`` must be in the owner's networks to be used."""
    assert problems_of(plan_bytes(), local_policy(networks=frozenset())) == [
        PlanProblem(path="$.network", message="network mode 'none' is not offered here")
    ]


def test_a_terminal_not_offered_here_is_refused() -> None:
    """A pty plan is refused where the owner offers only pipes."""
    local = local_policy(terminals=frozenset({"pipes"}))
    assert problems_of(plan_bytes(terminal="pty"), local) == [
        PlanProblem(path="$.terminal", message="terminal 'pty' is not offered here")
    ]


def test_every_problem_is_collected_each_with_its_path() -> None:
    """A plan wrong in every way lists every problem, in plan order."""
    local = local_policy(
        mechanisms={**local_policy().mechanisms, "disk_bytes": None},
        networks=frozenset(),
        terminals=frozenset({"pipes"}),
    )
    data = plan_bytes(
        harness="other",
        exposures=["nope", "gone", "work"],
        limits=limits(pids=9999, output_bytes=None),
        terminal="pty",
    )
    assert paths_of(data, local) == [
        "$.harness",
        "$.exposures[0]",
        "$.exposures[1]",
        "$.limits.pids",
        "$.limits.disk_bytes",
        "$.limits.output_bytes",
        "$.network",
        "$.terminal",
    ]


def test_thirty_two_unknown_exposures_and_everything_else_fit_in_one_error() -> None:
    """The worst case at the bounds (41 problems) is listed whole."""
    local = local_policy(harnesses={}, limits_max={}, networks=frozenset(), terminals=frozenset())
    data = plan_bytes(exposures=[f"e{i}" for i in range(32)])
    assert len(problems_of(data, local)) == 1 + 32 + 6 + 2


# --- hand-built plans ---------------------------------------------------------------------------


def _hand_built(**changes: Any) -> Plan:
    plan = decode_plan(plan_bytes())
    return msgspec.structs.replace(plan, **changes)


def test_a_hand_built_plan_is_judged_as_its_canonical_bytes_decode() -> None:
    """A Plan built in Python with a raw path is refused as decode_plan would refuse it."""
    with pytest.raises(PlanError) as caught:
        validate_plan(_hand_built(harness="/bin/sh"), local_policy())
    assert caught.value.problems[0].path == "$.harness"
    with pytest.raises(PlanError) as bounds:
        validate_plan(_hand_built(limits=PlanLimits(pids=True)), local_policy())
    assert bounds.value.problems[0].path == "$.limits.pids"


def test_a_hand_built_plan_is_normalized_to_what_its_digests_describe() -> None:
    """A list where the Struct holds a tuple validates as the decoded plan, same digests."""
    plan = _hand_built(exposures=["work"])
    validated = validate_plan(plan, local_policy())
    assert validated.plan.exposures == ("work",)
    assert validated.plan == decode_plan(plan_bytes())


# --- the local policy itself --------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"limits_max": {"memory": 1}},
        {"mechanisms": {"wall_time": "watchdog"}},
        {"accept_weaker": frozenset({"memory"})},
    ],
)
def test_a_local_policy_naming_unknown_limits_is_refused(changes: dict[str, Any]) -> None:
    """Container names (memory) or typos are not plan limit names: the owner hears about it."""
    with pytest.raises(LocalPolicyError, match="names unknown limits"):
        local_policy(**changes)


@pytest.mark.parametrize(
    "fields",
    [
        {"generation": 0, "mode": "ro", "target": "/w"},
        {"generation": True, "mode": "ro", "target": "/w"},
        {"generation": 1, "mode": "rx", "target": "/w"},
        {"generation": 1, "mode": "ro", "target": "w"},
    ],
)
def test_an_exposure_record_that_cannot_come_from_the_registry_is_refused(
    fields: dict[str, Any],
) -> None:
    """Generations start at 1, modes are ro or rw, targets are absolute."""
    with pytest.raises(LocalPolicyError):
        ExposurePolicy(**fields)


def test_a_harness_without_a_command_is_refused() -> None:
    """An empty argv is a broken gloved.toml table."""
    with pytest.raises(LocalPolicyError):
        HarnessPolicy(argv=())


# --- mechanisms ---------------------------------------------------------------------------------


def _host_variants() -> list[HostLimitSupport]:
    flags = itertools.product([False, True], repeat=3)
    return [
        HostLimitSupport(
            cgroup_v1_memory=memory,
            cgroup_v1_pids=pids,
            cgroup_v1_cpuacct=cpu,
            host_uid=uid,
            platform=platform,  # type: ignore[arg-type]
        )
        for (memory, pids, cpu), uid, platform in itertools.product(
            flags, (0, 1000), ("linux", "macos")
        )
    ]


def test_every_container_mechanism_is_classified() -> None:
    """Each MECH_* name of glove.container has a strength here (a new one must be added)."""
    names = {value for key, value in vars(container_limits).items() if key.startswith("MECH_")}
    assert names == set(FULL_MECHANISMS)


def test_the_strengths_agree_with_glove_container_on_every_host() -> None:
    """For every host shape and limit, the container's (mechanism, full) pairs match."""
    seen = 0
    for host in _host_variants():
        for name in container_limits.LIMIT_NAMES:
            for mechanism, full in _candidates(name, host):
                assert mechanism_is_full(mechanism) is full, (host, name, mechanism)
                seen += 1
    assert seen > 100
    assert mechanism_is_full("not-a-mechanism") is False


def test_host_mechanisms_is_what_the_sandbox_would_use() -> None:
    """The mechanism reported for each limit is the one glove.container picks on that host."""
    for host in _host_variants():
        found = host_mechanisms(host)
        assert set(found) == set(PLAN_LIMIT_NAMES)
        memory = _candidates("memory", host)
        assert found["memory_bytes"] == (memory[0][0] if memory else None)
    bare = host_mechanisms(HostLimitSupport(host_uid=0))
    assert bare == {
        "wall_time_s": "watchdog",
        "cpu_time_s": "rlimit-cpu-per-process",
        "memory_bytes": "rlimit-as-per-process",
        "pids": None,
        "disk_bytes": "tmpfs-size",
        "output_bytes": "pipe-accounting",
    }
