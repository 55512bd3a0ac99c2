"""The sans-IO limit planner, size parsing and spec validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from glove.container import (
    Bind,
    HostLimitSupport,
    LimitRefused,
    Limits,
    SandboxSpec,
    SpecError,
    parse_seconds,
    parse_size,
    plan_limits,
)
from glove.container._spec import normalize_inside, sandbox_owned

ROOT_V1 = HostLimitSupport(
    cgroup_v1_memory=True, cgroup_v1_pids=True, cgroup_v1_cpuacct=True, cgroup_v1_cpu=True
)
UNPRIV = HostLimitSupport(host_uid=1000)
ROOT_BARE = HostLimitSupport(host_uid=0)
ALL = Limits(wall_time=1, cpu_time=1, memory=2**30, pids=10, disk=2**20, output=10)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("4096", 4096),
        ("64M", 64 * 2**20),
        ("1G", 2**30),
        ("1.5GiB", 3 * 2**29),
        ("2k", 2048),
        ("3T", 3 * 2**40),
        (" 7 M ", 7 * 2**20),
    ],
)
def test_parse_size_accepts_suffixes(text: str, expected: int) -> None:
    """Sizes take K/M/G/T binary suffixes, optionally with iB."""
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "x", "-1", "1X", "1.2.3M", "M"])
def test_parse_size_rejects_garbage(text: str) -> None:
    """Anything that is not a size is a SpecError."""
    with pytest.raises(SpecError):
        parse_size(text)


@given(st.integers(min_value=0, max_value=2**50))
def test_parse_size_round_trips_integers(value: int) -> None:
    """A plain integer string parses to itself."""
    assert parse_size(str(value)) == value


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "soon"])
def test_parse_seconds_rejects_non_positive(text: str) -> None:
    """Durations must be positive finite numbers."""
    with pytest.raises(SpecError):
        parse_seconds(text)


def test_root_with_cgroups_gets_full_mechanisms() -> None:
    """Every limit gets a whole-sandbox mechanism when v1 cgroups are writable."""
    plans = plan_limits(ALL, ROOT_V1, frozenset())
    assert {name: plan.mechanism for name, plan in plans.items()} == {
        "wall_time": "watchdog",
        "cpu_time": "cgroup-v1-cpuacct-watchdog",
        "memory": "cgroup-v1-memory",
        "pids": "cgroup-v1-pids",
        "disk": "tmpfs-size",
        "output": "pipe-accounting",
    }
    assert all(plan.full for plan in plans.values())


def test_unprivileged_pids_use_the_userns_nproc_rlimit() -> None:
    """Without cgroups, a non-zero uid still gets a per-sandbox pids cap."""
    plans = plan_limits(Limits(pids=10), UNPRIV, frozenset())
    assert plans["pids"].mechanism == "rlimit-nproc-userns"
    assert plans["pids"].full


@pytest.mark.parametrize("name", ["memory", "cpu_time"])
def test_weaker_mechanism_is_refused_unless_accepted(name: str) -> None:
    """A per-process fallback is refused with a reason naming the flag that accepts it."""
    limits = Limits(**{name: 2**30 if name == "memory" else 1.0})
    with pytest.raises(LimitRefused) as info:
        plan_limits(limits, UNPRIV, frozenset())
    assert info.value.limit == name
    assert f"--accept-weaker {name}" in info.value.reason
    accepted = plan_limits(limits, UNPRIV, frozenset({name}))
    assert not accepted[name].full
    assert plan_limits(limits, UNPRIV, frozenset({"all"}))[name].mechanism.startswith("rlimit")


def test_root_without_cgroups_cannot_limit_pids_at_all() -> None:
    """Host uid 0 is exempt from RLIMIT_NPROC, so pids is refused even if weaker is accepted."""
    with pytest.raises(LimitRefused) as info:
        plan_limits(Limits(pids=10), ROOT_BARE, frozenset({"all"}))
    assert "uid 0" in info.value.reason


def test_unknown_accept_weaker_name_is_an_error() -> None:
    """A typo in --accept-weaker is not silently ignored."""
    with pytest.raises(SpecError):
        plan_limits(Limits(), UNPRIV, frozenset({"memroy"}))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"memory": 1},
        {"pids": 1},
        {"disk": 10},
        {"wall_time": 0},
        {"cpu_time": -1},
        {"output": -5},
        {"wall_time": float("inf")},
    ],
)
def test_out_of_range_limits_are_rejected(kwargs: dict[str, float]) -> None:
    """Limits no mechanism could apply are a SpecError at construction."""
    with pytest.raises(SpecError):
        Limits(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bind",
    [
        {"source": "rel"},
        {"source": "/x", "target": "/"},
        {"source": "/x", "target": "/proc/x"},
        {"source": "/x", "target": "/dev"},
        {"source": "/x", "target": "/tmp"},
        {"source": "/x", "target": "//tmp/."},
        {"source": "/x", "target": "//proc"},
        {"source": "/x", "target": "/a/../dev/x"},
    ],
)
def test_bad_binds_are_rejected(bind: dict[str, str]) -> None:
    """Relative sources and targets on sandbox-owned paths are refused."""
    with pytest.raises(SpecError):
        Bind(**bind)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("inside", "owned"),
    [
        ("/", "/"),
        ("/tmp", "/tmp"),
        ("//tmp/", "/tmp"),
        ("/tmp/x", None),
        ("/tmp/x/../../tmp/y", None),
        ("/tmp/..", "/"),
        ("/proc", "/proc"),
        ("/proc/1", "/proc"),
        ("/dev", "/dev"),
        ("/dev/shm/x", "/dev"),
        ("/devx", None),
        ("/tmpx", None),
        ("/run/x", None),
        ("/var/tmp/x", None),
    ],
)
def test_what_the_sandbox_owns(inside: str, owned: str | None) -> None:
    """Only the root, /tmp itself and the trees under /proc and /dev are the sandbox's own:
    a path below /tmp is shown at its own path (a bind target there is accepted)."""
    assert sandbox_owned(inside) == owned
    if owned is None:
        assert Bind(source="/x", target=inside).destination == normalize_inside(inside)


def test_spec_validation() -> None:
    """Empty commands, NUL bytes, stdio fd numbers and bad env keys are refused."""
    bad: list[dict[str, object]] = [
        {"argv": ()},
        {"argv": ("a\0b",)},
        {"argv": ("x",), "pass_fds": {2: 5}},
        {"argv": ("x",), "env": {"A=B": "1"}},
        {"argv": ("x",), "cwd": "rel"},
    ]
    for kwargs in bad:
        with pytest.raises(SpecError):
            SandboxSpec(**kwargs)  # type: ignore[arg-type]
    assert SandboxSpec(argv=("x",)).working_directory == "/"
    assert SandboxSpec(argv=("x",), workspace="/w").working_directory == "/workspace"


def test_limit_support_reports_every_limit() -> None:
    """limit_support names a mechanism (or a refusal reason) for each of the six limits and
    the CPU rate."""
    from glove.container import SANDBOX_LIMIT_NAMES, limit_support

    report = limit_support(UNPRIV)
    assert list(report) == list(SANDBOX_LIMIT_NAMES)
    assert report["pids"].mechanism == "rlimit-nproc-userns"
    assert report["pids"].full
    assert not report["memory"].full
    assert "--accept-weaker memory" in report["memory"].reason
    bare = limit_support(ROOT_BARE)
    assert bare["pids"].mechanism is None
    assert "uid 0" in bare["pids"].reason
    assert all(s.full for s in limit_support(ROOT_V1).values())


def test_self_test_launches_a_real_sandbox() -> None:
    """self_test runs /bin/true in a real sandbox and reports success."""
    from glove.container import self_test

    worked, detail = self_test()
    assert worked, detail
    assert "ms" in detail


HYBRID_ROOT = HostLimitSupport(
    cgroup_v1_memory=True,
    cgroup_v1_pids=True,
    cgroup_v1_cpuacct=True,
    cgroup_v2_group=True,
    unavailable={
        "cgroup-v2-memory": "the memory controller is bound to cgroup v1 (hierarchy 4)",
        "cgroup-v2-pids": "the pids controller is bound to cgroup v1 (hierarchy 8)",
    },
)
PURE_V2_ROOT = HostLimitSupport(cgroup_v2_group=True, cgroup_v2_memory=True, cgroup_v2_pids=True)
#: An unprivileged launcher in a delegated v2 cgroup of a hybrid host: a group, no controllers.
HYBRID_DELEGATED = HostLimitSupport(
    host_uid=1000,
    cgroup_v2_group=True,
    unavailable={"cgroup-v2-memory": "the memory controller is bound to cgroup v1 (hierarchy 4)"},
)


def test_pure_v2_puts_every_cgroup_limit_on_v2() -> None:
    """With a delegated v2 subtree and its controllers, memory, pids and CPU time use v2."""
    plans = plan_limits(ALL, PURE_V2_ROOT, frozenset())
    assert {n: p.mechanism for n, p in plans.items() if n in ("memory", "pids", "cpu_time")} == {
        "cpu_time": "cgroup-v2-cpu-watchdog",
        "memory": "cgroup-v2-memory",
        "pids": "cgroup-v2-pids",
    }
    assert all(plan.full for plan in plans.values())


def test_hybrid_root_chooses_per_limit() -> None:
    """A hybrid host: CPU time from the v2 group's cpu.stat, memory and pids on v1."""
    plans = plan_limits(ALL, HYBRID_ROOT, frozenset())
    assert plans["cpu_time"].mechanism == "cgroup-v2-cpu-watchdog"
    assert plans["memory"].mechanism == "cgroup-v1-memory"
    assert plans["pids"].mechanism == "cgroup-v1-pids"


def test_v2_controller_without_a_group_is_not_used() -> None:
    """A controller flag alone (no group to put a sandbox in) never selects a v2 mechanism."""
    host = HostLimitSupport(cgroup_v2_memory=True, cgroup_v2_pids=True, host_uid=1000)
    plans = plan_limits(Limits(memory=2**30, pids=10), host, frozenset({"all"}))
    assert plans["memory"].mechanism == "rlimit-as-per-process"
    assert plans["pids"].mechanism == "rlimit-nproc-userns"


def test_delegated_without_controllers_refuses_memory_with_the_reason() -> None:
    """Delegated on a hybrid host: memory has only the rlimit; the refusal names why v2 and
    v1 were passed over, and CPU time is still whole-tree on v2."""
    with pytest.raises(LimitRefused) as info:
        plan_limits(Limits(memory=2**30), HYBRID_DELEGATED, frozenset())
    reason = info.value.reason
    assert "cgroup-v2-memory: the memory controller is bound to cgroup v1" in reason
    assert "cgroup-v1-memory: not offered to this launcher" in reason
    assert "--accept-weaker memory" in reason
    cpu = plan_limits(Limits(cpu_time=1.0), HYBRID_DELEGATED, frozenset())["cpu_time"]
    assert cpu.mechanism == "cgroup-v2-cpu-watchdog"
    assert cpu.full


def test_root_refusal_lists_every_rung() -> None:
    """Root with nothing usable for pids: the refusal lists each mechanism and its reason."""
    bare = HostLimitSupport(unavailable={"cgroup-v2": "no cgroup2 filesystem"})
    with pytest.raises(LimitRefused) as info:
        plan_limits(Limits(pids=10), bare, frozenset({"all"}))
    reason = info.value.reason
    assert reason.startswith("no mechanism on this machine (cgroup-v2-pids: no cgroup2 filesystem")
    assert "rlimit-nproc-userns: host uid 0 is exempt from RLIMIT_NPROC" in reason


def test_explain_limit_names_the_choice_and_what_was_passed_over() -> None:
    """explain_limit says the chosen mechanism, its strength and each better one skipped."""
    from glove.container._limits import explain_limit

    assert explain_limit("pids", HYBRID_ROOT) == (
        "cgroup-v1-pids (whole sandbox), passed over cgroup-v2-pids (the pids controller is "
        "bound to cgroup v1 (hierarchy 8))"
    )
    assert explain_limit("cpu_time", HYBRID_ROOT) == "cgroup-v2-cpu-watchdog (whole sandbox)"
    assert explain_limit("memory", UNPRIV).startswith(
        "rlimit-as-per-process (per process, only with --accept-weaker), passed over"
    )
    assert explain_limit("pids", ROOT_BARE).startswith("none; passed over cgroup-v2-pids (")
