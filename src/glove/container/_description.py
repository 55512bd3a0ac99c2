"""What ``--dry-run`` prints: the sandbox a spec would build, as plain values (sans-IO).

Each backend fills it in (``glove.container.linux._describe`` for Linux).
"""

from __future__ import annotations

import msgspec


class MountPlan(msgspec.Struct, frozen=True, omit_defaults=True):
    """One entry of the sandbox's filesystem, in mount order."""

    target: str
    kind: str
    mode: str
    source: str | None = None
    note: str | None = None


class LimitDescription(msgspec.Struct, frozen=True):
    """One limit: its value, the mechanism chosen here and whether it bounds the tree."""

    value: float | int
    mechanism: str
    full: bool


class SeccompSummary(msgspec.Struct, frozen=True):
    """The seccomp filter in words."""

    default: str
    denied_syscalls: list[str]
    denied_ioctls: list[str]
    socket_families: list[str]
    other: list[str]


class SandboxDescription(msgspec.Struct, frozen=True):
    """The computed sandbox of ``--dry-run`` (``--json`` prints exactly this)."""

    argv: list[str]
    cwd: str
    hostname: str
    pty: bool
    network: dict[str, object]
    mounts: list[MountPlan]
    skipped_binds: list[str]
    env: dict[str, str]
    limits: dict[str, LimitDescription]
    seccomp: SeccompSummary
    pass_fds: dict[int, int]
    protected: list[str]
