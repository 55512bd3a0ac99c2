"""What ``glove exec`` and ``glove run`` tell a person on stderr, and the dry-run listing.

Three kinds of text, all suppressed by ``--quiet`` except the dry run itself:

* notes before the run: a limit enforced by a weaker (per-process) mechanism, a workspace
  shown at another path than on the host;
* one summary line at exit when anything was refused or a limit was hit: seccomp denials
  by name and count, the limit and its value, MCP calls denied;
* the ``--dry-run`` listing (``--json`` prints the :class:`SandboxDescription` itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from glove.container import (
    LimitPlan,
    SandboxDescription,
    SandboxResult,
    SandboxSpec,
    sandbox_owned,
)

#: Distinct denied syscalls named in the summary line (the rest are counted).
SUMMARY_SYSCALLS: Final = 6

_WEAKER_WORDS: Final = {
    "rlimit-as-per-process": "RLIMIT_AS, per process",
    "rlimit-cpu-per-process": "RLIMIT_CPU, per process",
}


def format_size(value: float) -> str:
    """Bytes as a short binary size (``4G``, ``512M``, ``1000``)."""
    for unit, scale in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= scale and value % scale == 0:
            return f"{int(value // scale)}{unit}"
    return str(int(value))


def format_seconds(value: float) -> str:
    """Seconds as a short duration (``24h``, ``30m``, ``2.5s``)."""
    for unit, scale in (("d", 86400), ("h", 3600), ("m", 60)):
        if value >= scale and value % scale == 0:
            return f"{int(value // scale)}{unit}"
    return f"{value:g}s"


def format_limit(name: str, value: float) -> str:
    """A limit's value as a person writes it."""
    if name in ("wall_time", "cpu_time"):
        return format_seconds(value)
    if name == "pids":
        return str(int(value))
    if name == "cpus":
        return f"{value:g}"
    return format_size(value)


def _shown_elsewhere(workspace: str) -> bool:
    """Whether the same-path default could not apply (the path is the sandbox's own)."""
    return sandbox_owned(workspace) is not None


def notes_before(spec: SandboxSpec, plans: Mapping[str, LimitPlan]) -> list[str]:
    """The notes printed before the command runs (unless ``--quiet``)."""
    notes: list[str] = []
    weaker = [plan for plan in plans.values() if not plan.full]
    if weaker:
        parts = ", ".join(
            f"{plan.name} {format_limit(plan.name, plan.value)} "
            f"({_WEAKER_WORDS.get(plan.mechanism, plan.mechanism)})"
            for plan in weaker
        )
        notes.append(
            f"note: {parts}: no writable cgroup for the whole sandbox here, so each process "
            "is limited on its own (glove doctor explains; --quiet hides this)"
        )
    if spec.workspace is not None and _shown_elsewhere(spec.workspace):
        notes.append(
            f"note: the workspace {spec.workspace} appears at {spec.workspace_target} inside "
            "(the sandbox owns that part of the tree); tools on the host still use "
            f"{spec.workspace}"
        )
    return notes


def exit_summary(
    result: SandboxResult,
    denied_calls: int = 0,
    first_denied: str | None = None,
    egress: str | None = None,
    withheld: int = 0,
) -> str | None:
    """One line naming everything refused or hit, or None when nothing was.

    ``egress`` is the proxy's line (``EgressStats.summary()``): denied connections and
    lookups with the first few destinations; ``withheld`` the terminal sequences the
    output filter kept from the operator's terminal.
    """
    parts: list[str] = []
    if result.denied_syscalls:
        ordered = sorted(result.denied_syscalls.items(), key=lambda item: (-item[1], item[0]))
        named = ", ".join(f"{name} x{count}" for name, count in ordered[:SUMMARY_SYSCALLS])
        more = len(ordered) - SUMMARY_SYSCALLS
        parts.append(f"seccomp refused {named}" + (f" and {more} more" if more > 0 else ""))
    elif result.violation == "seccomp":
        parts.append("seccomp killed the command (a foreign-architecture syscall)")
    for name, report in result.limits.items():
        if report.hit and name == "cpus":  # a rate throttles; the command went on
            parts.append(
                f"cpus {format_limit(name, report.value)} throttled the tree ({report.mechanism})"
            )
        elif report.hit:
            parts.append(
                f"{name} limit {format_limit(name, report.value)} reached ({report.mechanism})"
            )
    if denied_calls:
        parts.append(f"{denied_calls} MCP call(s) denied (first: {first_denied})")
    if egress:
        parts.append(egress)
    if withheld:
        parts.append(f"{withheld} terminal sequence(s) withheld from your terminal (--raw)")
    if not parts:
        return None
    return "; ".join(parts)


def _network_rules(network: Mapping[str, object]) -> list[str]:
    """The egress rules of ``proxy`` mode, one line each (deny rules win)."""
    if network.get("mode") != "proxy":
        return []
    allow = network.get("allow")
    deny = network.get("deny")
    allow = allow if isinstance(allow, list) else []
    deny = deny if isinstance(deny, list) else []
    lines = [
        "          through the egress proxy on 127.0.0.1:3128 (HTTP), :1080 (SOCKS5), :53 (DNS)"
    ]
    if not allow:
        lines.append("          allow: nothing (the allowlist is empty)")
    lines += [f"          allow: {rule}" for rule in allow]
    lines += [f"          deny:  {rule}" for rule in deny]
    return lines


def render_description(description: SandboxDescription) -> str:
    """The ``--dry-run`` listing for a person."""
    d = description
    lines = [
        f"command:  {' '.join(d.argv)}",
        f"cwd:      {d.cwd}",
        f"hostname: {d.hostname}    terminal: {'pty' if d.pty else 'pipes'}",
        f"network:  {d.network['mode']} (interfaces: lo; no routes)",
    ]
    lines += _network_rules(d.network)
    lines += [
        "mounts:",
    ]
    width = max(len(m.target) for m in d.mounts)
    for mount in d.mounts:
        origin = mount.source or mount.note or ""
        if mount.source and mount.note:
            origin = f"{mount.source} ({mount.note})"
        lines.append(f"  {mount.target:<{width}}  {mount.mode}  {mount.kind:<7}  {origin}")
    if d.skipped_binds:
        lines.append(f"  (absent here, skipped: {', '.join(d.skipped_binds)})")
    lines.append("environment:")
    lines += [f"  {key}={value}" for key, value in sorted(d.env.items())]
    lines.append("limits:")
    for name, limit in d.limits.items():
        strength = "whole sandbox" if limit.full else "per process (weaker)"
        lines.append(
            f"  {name:<9} {format_limit(name, limit.value):>6}  {limit.mechanism} ({strength})"
        )
    s = d.seccomp
    denied = ", ".join(s.denied_syscalls[:8])
    lines.append(
        f"seccomp:  default {s.default}; EPERM for {len(s.denied_syscalls)} syscalls"
        f" ({denied}, ...)"
    )
    families = ", ".join(s.socket_families)
    lines.append(f"          ioctl {', '.join(s.denied_ioctls)} refused; sockets only {families}")
    lines += [f"          {item}" for item in s.other]
    if d.pass_fds:
        fds = ", ".join(str(inside) for inside in d.pass_fds)
        lines.append(f"passed fds: {fds} (besides stdio)")
    if d.protected:
        lines.append(f"never shown: {', '.join(d.protected)}")
    return "\n".join(lines)
