"""The CPU rate limit ``cpus`` without a sandbox: parsing, the planner's two rungs and its
refusals, profiles, the shared option parser, the verdict and the report."""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from glove.cli import _exec as exec_cli
from glove.cli import _run as run_cli
from glove.container import (
    LIMIT_NAMES,
    SANDBOX_LIMIT_NAMES,
    HostLimitSupport,
    LimitPlan,
    LimitRefused,
    Limits,
    ProfileError,
    SandboxSpec,
    SpecError,
    build_spec,
    decode_profile,
    limit_support,
    parse_cpus,
    plan_limits,
)
from glove.container._limits import (
    CPU_PERIOD_US,
    MAX_CPUS,
    MIN_CPU_QUOTA_US,
    MIN_CPUS,
    cpu_quota_us,
    explain_limit,
)
from glove.container._status import Exited, Ready, Started
from glove.container._verdict import Observed, decide
from glove.plan import PLAN_LIMIT_NAMES
from glove.run._options import sandbox_options
from glove.run._prepare import limit_overrides
from glove.run._report import exit_summary, format_limit, render_description

V1_REASON = "the cpu controller is bound to cgroup v1 (hierarchy 1)"
#: This host's layout as root: a v2 group without controllers, the v1 cpu hierarchy writable.
HYBRID_ROOT = HostLimitSupport(
    cgroup_v1_cpu=True,
    cgroup_v2_group=True,
    unavailable={"cgroup-v2-cpu-max": V1_REASON},
)
PURE_V2 = HostLimitSupport(cgroup_v2_group=True, cgroup_v2_cpu=True)
#: A launcher with no writable cgroup at all (an unprivileged user here).
NOTHING = HostLimitSupport(
    host_uid=1000,
    unavailable={
        "cgroup-v2": "the launcher's cgroup is not delegated to uid 1000",
        "cgroup-v1-cpu-cfs": "/sys/fs/cgroup/cpu/glove is not writable by uid 1000",
    },
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.5", 0.5), ("2", 2.0), (" 1.25 ", 1.25), ("0.01", 0.01), (3, 3.0), (0.25, 0.25)],
)
def test_parse_cpus_accepts_decimals(text: str | float, expected: float) -> None:
    """A number of CPUs is a decimal (a string from the CLI, a number from TOML)."""
    assert parse_cpus(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "x", "0", "-1", "nan", "inf", "0.001", "5000", "1e9", "50%", "1_0", "\uff11", "0x1", True],
)
def test_parse_cpus_refuses_what_no_quota_can_be(text: str | bool) -> None:
    """Zero, negatives, non-finite values, less than one quota step, absurd counts and what
    Python's float() would take but is not a plain decimal are SpecErrors."""
    with pytest.raises(SpecError):
        parse_cpus(text)


@given(st.one_of(st.text(max_size=40), st.floats(allow_nan=True, allow_infinity=True)))
def test_parse_cpus_returns_a_rate_in_range_or_a_spec_error(text: str | float) -> None:
    """Any text or number: a finite rate within the range, or SpecError; nothing else."""
    try:
        value = parse_cpus(text)
    except SpecError:
        return
    assert math.isfinite(value)
    assert MIN_CPUS <= value <= MAX_CPUS


@given(st.floats(min_value=MIN_CPUS, max_value=MAX_CPUS))
def test_quota_is_the_rate_times_the_period(cpus: float) -> None:
    """The quota per 100 ms period is cpus x period, never below the kernel's 1 ms floor."""
    quota = cpu_quota_us(cpus)
    assert quota >= MIN_CPU_QUOTA_US
    assert math.isclose(quota, cpus * CPU_PERIOD_US, abs_tol=0.5)


def test_quota_examples() -> None:
    """Docker's arithmetic: 0.5 CPU is 50000/100000, 2 CPUs 200000/100000."""
    assert CPU_PERIOD_US == 100_000
    assert cpu_quota_us(0.5) == 50_000
    assert cpu_quota_us(2) == 200_000
    assert cpu_quota_us(MIN_CPUS) == 1_000
    assert cpu_quota_us(0.015) == 1_500


def test_limits_validate_cpus() -> None:
    """Limits refuses a rate no quota can express; unset means no rate limit."""
    assert Limits().cpus is None
    assert Limits(cpus=0.5).cpus == 0.5
    for bad in (0.0, -1.0, float("nan"), 1e6):
        with pytest.raises(SpecError):
            Limits(cpus=bad)


def test_the_six_limit_contract_is_unchanged() -> None:
    """cpus is a seventh, optional limit: the contract's six names and plan v1's required
    set stay as they were."""
    assert LIMIT_NAMES == ("wall_time", "cpu_time", "memory", "pids", "disk", "output")
    assert (*LIMIT_NAMES, "cpus") == SANDBOX_LIMIT_NAMES
    assert "cpus" not in PLAN_LIMIT_NAMES
    assert len(PLAN_LIMIT_NAMES) == 6


def test_pure_v2_uses_cpu_max() -> None:
    """With a v2 group and its cpu controller the rate is cgroup-v2-cpu-max, whole tree."""
    plan = plan_limits(Limits(cpus=0.5), PURE_V2, frozenset())["cpus"]
    assert plan == LimitPlan("cpus", 0.5, "cgroup-v2-cpu-max", full=True)
    assert explain_limit("cpus", PURE_V2) == "cgroup-v2-cpu-max (whole sandbox)"


def test_hybrid_root_falls_to_v1_cfs_and_says_why() -> None:
    """Root on this hybrid layout: v2 has a group but no cpu controller, so the rate goes to
    v1 CFS bandwidth, and the reason v2 was passed over is kept."""
    plan = plan_limits(Limits(cpus=0.25), HYBRID_ROOT, frozenset())["cpus"]
    assert plan.mechanism == "cgroup-v1-cpu-cfs"
    assert plan.full
    assert explain_limit("cpus", HYBRID_ROOT) == (
        f"cgroup-v1-cpu-cfs (whole sandbox), passed over cgroup-v2-cpu-max ({V1_REASON})"
    )


def test_both_rungs_prefer_v2() -> None:
    """Where both exist, cpu.max wins, as v2 does for every other limit."""
    both = HostLimitSupport(cgroup_v2_group=True, cgroup_v2_cpu=True, cgroup_v1_cpu=True)
    assert plan_limits(Limits(cpus=1), both, frozenset())["cpus"].mechanism == "cgroup-v2-cpu-max"


def test_a_cpu_controller_without_a_group_is_not_used() -> None:
    """The v2 cpu flag alone (no group to put the sandbox in) never selects cpu.max."""
    host = HostLimitSupport(cgroup_v2_cpu=True, unavailable={"cgroup-v2": "no cgroup2 mount"})
    with pytest.raises(LimitRefused) as info:
        plan_limits(Limits(cpus=1), host, frozenset())
    assert "cgroup-v2-cpu-max: no cgroup2 mount" in info.value.reason


def test_no_mechanism_refuses_naming_every_rung() -> None:
    """Without either rung cpus is refused (never dropped) with each rung's reason."""
    with pytest.raises(LimitRefused) as info:
        plan_limits(Limits(cpus=0.5), NOTHING, frozenset())
    assert info.value.limit == "cpus"
    assert info.value.reason == (
        "no mechanism on this machine (cgroup-v2-cpu-max: the launcher's cgroup is not "
        "delegated to uid 1000; cgroup-v1-cpu-cfs: /sys/fs/cgroup/cpu/glove is not writable "
        "by uid 1000)"
    )
    assert explain_limit("cpus", NOTHING).startswith("none; passed over cgroup-v2-cpu-max (")


def test_accept_weaker_does_not_apply_to_the_rate() -> None:
    """There is no per-process rate: --accept-weaker all still refuses, and naming cpus in
    --accept-weaker is an error rather than a silent no-op."""
    with pytest.raises(LimitRefused):
        plan_limits(Limits(cpus=0.5), NOTHING, frozenset({"all"}))
    with pytest.raises(SpecError, match="does not apply to cpus"):
        plan_limits(Limits(cpus=0.5), HYBRID_ROOT, frozenset({"cpus"}))


def test_an_unset_rate_plans_nothing() -> None:
    """Without cpus the planner adds no rate plan, so no cpu group is made."""
    plans = plan_limits(Limits(wall_time=1), NOTHING, frozenset())
    assert "cpus" not in plans


def test_macos_refuses_the_rate_with_its_own_reason() -> None:
    """Seatbelt has no CPU-rate control: cpus is refused with a macOS reason."""
    with pytest.raises(LimitRefused) as info:
        plan_limits(Limits(cpus=1), HostLimitSupport(platform="macos"), frozenset())
    assert "no per-sandbox CPU-rate control" in info.value.reason


def test_limit_support_lists_the_rate_last() -> None:
    """doctor's and capabilities' report has cpus after the six: a mechanism or a reason."""
    assert list(limit_support(HYBRID_ROOT))[-1] == "cpus"
    assert limit_support(HYBRID_ROOT)["cpus"].mechanism == "cgroup-v1-cpu-cfs"
    missing = limit_support(NOTHING)["cpus"]
    assert missing.mechanism is None
    assert "cgroup-v1-cpu-cfs" in missing.reason


def test_profile_limits_take_cpus() -> None:
    """``[limits] cpus`` takes a number or a string; a bad one names the profile."""
    for raw in ("0.5", '"0.5"'):
        profile = decode_profile(f"[limits]\ncpus = {raw}\n".encode(), "p.toml")
        spec = build_spec(profile, ["true"], cwd="/", host_env={})
        assert spec.limits.cpus == 0.5
    spec = build_spec(
        decode_profile(b"[limits]\ncpus = 2\n", "p.toml"), ["x"], cwd="/", host_env={}
    )
    assert spec.limits.cpus == 2.0
    with pytest.raises(ProfileError, match="not a number of CPUs"):
        build_spec(
            decode_profile(b'[limits]\ncpus = "lots"\n', "p.toml"), ["x"], cwd="/", host_env={}
        )


@pytest.mark.parametrize(("module", "before"), [(exec_cli, []), (run_cli, ["-c", "m.toml"])])
def test_both_commands_parse_cpus(module: object, before: list[str]) -> None:
    """``--cpus`` is one flag of the shared parser: glove exec and glove run read it alike,
    and it becomes the cpus limit (a bad value names the flag)."""
    parser = module.build_parser()  # type: ignore[attr-defined]
    opts = sandbox_options(parser, parser.parse_args([*before, "--cpus", "0.5", "--", "true"]))
    assert opts.cpus == "0.5"
    assert limit_overrides(opts) == {"cpus": 0.5}
    bad = sandbox_options(parser, parser.parse_args([*before, "--cpus", "half", "--", "true"]))
    with pytest.raises(SpecError, match=r"^--cpus: not a number of CPUs"):
        limit_overrides(bad)


def test_a_command_line_rate_overrides_the_profile() -> None:
    """A --cpus value replaces the profile's cpus, as every limit flag does."""
    from glove.container import Overrides

    profile = decode_profile(b"[limits]\ncpus = 2\n", "p.toml")
    spec = build_spec(
        profile, ["x"], cwd="/", host_env={}, overrides=Overrides(limits={"cpus": 0.25})
    )
    assert spec.limits.cpus == 0.25


def _observed(throttled: bool) -> Observed:
    return Observed(messages=[Ready(), Started(), Exited(0)], cpus_throttled=throttled)


def test_verdict_reports_throttling_as_the_hit_and_keeps_the_outcome() -> None:
    """A throttled tree has cpus hit: true, but the command's own exit stands (a rate never
    ends a sandbox); an unthrottled one has hit: false."""
    spec = SandboxSpec(argv=("x",), limits=Limits(cpus=0.25))
    plans = {"cpus": LimitPlan("cpus", 0.25, "cgroup-v1-cpu-cfs", full=True)}
    result = decide(_observed(True), spec, plans)
    assert result.outcome == "exited"
    assert result.exit_code == 0
    assert msgspec.to_builtins(result.limits["cpus"]) == {
        "value": 0.25,
        "mechanism": "cgroup-v1-cpu-cfs",
        "hit": True,
    }
    assert result.limits["cpus"].hit is True
    assert decide(_observed(False), spec, plans).limits["cpus"].hit is False


def test_report_words_the_rate() -> None:
    """The summary line says the tree was throttled (not a limit "reached"); the dry-run
    listing shows the rate as a plain number."""
    spec = SandboxSpec(argv=("x",), limits=Limits(cpus=0.25))
    plans = {"cpus": LimitPlan("cpus", 0.25, "cgroup-v2-cpu-max", full=True)}
    assert format_limit("cpus", 0.25) == "0.25"
    assert format_limit("cpus", 2.0) == "2"
    assert exit_summary(decide(_observed(True), spec, plans)) == (
        "cpus 0.25 throttled the tree (cgroup-v2-cpu-max)"
    )
    assert exit_summary(decide(_observed(False), spec, plans)) is None
    from glove.container._description import (
        LimitDescription,
        MountPlan,
        SandboxDescription,
        SeccompSummary,
    )

    listing = render_description(
        SandboxDescription(
            argv=["x"],
            cwd="/",
            hostname="glove",
            pty=False,
            network={"mode": "none"},
            mounts=[MountPlan("/", "tmpfs", "ro")],
            skipped_binds=[],
            env={},
            limits={"cpus": LimitDescription(0.25, "cgroup-v2-cpu-max", True)},
            seccomp=SeccompSummary("allow", [], [], [], []),
            pass_fds={},
            protected=[],
        )
    )
    assert "  cpus        0.25  cgroup-v2-cpu-max (whole sandbox)" in listing
