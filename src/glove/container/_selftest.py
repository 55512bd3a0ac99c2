"""What the sandbox can do on this machine, for ``glove doctor`` (and operators).

:func:`limit_support` says, for this launcher, which mechanism each limit (the six and the
CPU rate ``cpus``) would get and whether it bounds the whole sandbox; :func:`self_test`
launches a real sandbox (``/bin/true`` with the default profile's system binds) and returns
its result, which is the only trustworthy answer to "does the sandbox work here".
"""

from __future__ import annotations

import os
from typing import Final

import msgspec

from glove.container._limits import SANDBOX_LIMIT_NAMES, HostLimitSupport, Limits, plan_limits
from glove.container.errors import LimitRefused

#: Probe values, one per limit, used only to ask the planner which mechanism applies.
_PROBE_LIMITS: Final = Limits(
    wall_time=1.0,
    cpu_time=1.0,
    memory=64 * 1024 * 1024,
    pids=64,
    disk=1024 * 1024,
    output=1,
    cpus=1.0,
)


class LimitSupport(msgspec.Struct, frozen=True):
    """How one limit would be enforced by this launcher.

    Attributes:
        mechanism: the mechanism, or None when the limit is refused outright.
        full: whether it bounds the whole sandbox (False: only with ``--accept-weaker``).
        reason: why it is refused or weaker, for a person to read.
    """

    mechanism: str | None
    full: bool
    reason: str = ""


def limit_support(host: HostLimitSupport) -> dict[str, LimitSupport]:
    """Return the mechanism each limit (the six, then ``cpus``) gets from ``host`` (see
    probe_host_limits)."""
    report: dict[str, LimitSupport] = {}
    for name in SANDBOX_LIMIT_NAMES:
        single = msgspec.structs.replace(Limits(), **{name: getattr(_PROBE_LIMITS, name)})
        try:
            strict = plan_limits(single, host, frozenset())[name]
            report[name] = LimitSupport(strict.mechanism, full=True)
            continue
        except LimitRefused as exc:
            reason = exc.reason
        try:
            weaker = plan_limits(single, host, frozenset({"all"}))[name]
            report[name] = LimitSupport(weaker.mechanism, full=False, reason=reason)
        except LimitRefused as exc:
            report[name] = LimitSupport(None, full=False, reason=exc.reason)
    return report


def self_test() -> tuple[bool, str]:
    """Launch ``true`` in a default-profile sandbox; return (worked, what happened).

    Never raises: a refusal or failure is the answer.
    """
    from glove.container._profile import build_spec, load_profile
    from glove.container.errors import SandboxError
    from glove.container.linux import run

    try:
        spec = build_spec(load_profile(None), ["true"], cwd="/", host_env={})
        spec = msgspec.structs.replace(spec, workspace=None, limits=Limits(wall_time=30.0))
        fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            result = run(spec, stdin=fd, stdout=fd, stderr=fd)
        finally:
            os.close(fd)
    except (SandboxError, OSError) as exc:
        return False, str(exc)
    if result.outcome == "exited" and result.exit_code == 0:
        return True, f"sandboxed /bin/true ran in {result.durations.total_s * 1000:.1f} ms"
    return False, result.error or f"{result.outcome} (exit {result.exit_code})"
