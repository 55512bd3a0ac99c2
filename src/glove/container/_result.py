"""The outcome of one sandboxed command, and the exit-code convention (sans-IO).

Exit codes (:mod:`glove.exits`): the command's own code; ``128 + N`` when it was killed by
signal N (a limit kill is SIGKILL, so 137); ``125`` when the sandbox could not be set up
(nothing ran); ``126`` when the command exists but cannot be executed; ``127`` when it is not
found. Because a command can
itself exit 125-127, the structured result (``--json-status``) carries ``outcome`` so a
program never has to guess.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from glove.exits import EXIT_SETUP_FAILED, EXIT_SIGNAL_BASE

Outcome = Literal[
    "exited", "signaled", "limit", "setup_error", "exec_error", "usage_error", "mediation_failed"
]


class LimitReport(msgspec.Struct, frozen=True):
    """One limit in a result: its value, what enforced it, whether it was reached.

    ``hit`` is ``None`` when the mechanism cannot observe it: a per-process ``RLIMIT_AS``
    makes an allocation inside fail with ENOMEM (a ``MemoryError``), which nothing outside
    the process sees, unless the run otherwise shows it (see ``docs/sandbox.md``).
    """

    value: float | int
    mechanism: str
    hit: bool | None = False


class Usage(msgspec.Struct, frozen=True):
    """What the sandboxed tree used (from its init's ``RUSAGE_CHILDREN``).

    Attributes:
        cpu_user_s: user CPU seconds of every process of the tree.
        cpu_system_s: system CPU seconds of every process of the tree.
        peak_rss_bytes: the largest resident set of any one process.
        disk_bytes: bytes in use on the scratch tmpfs when the command ended.
    """

    cpu_user_s: float = 0.0
    cpu_system_s: float = 0.0
    peak_rss_bytes: int = 0
    disk_bytes: int | None = None


class OutputReport(msgspec.Struct, frozen=True):
    """How much output was passed on, and whether it was cut at the output limit."""

    bytes: int = 0
    truncated: bool = False


class RetainedReport(msgspec.Struct, frozen=True):
    """A retained copy after the run: its image, hard size and the bytes in use."""

    image: str
    size: int
    used_bytes: int | None = None


class Durations(msgspec.Struct, frozen=True):
    """Seconds spent: launching (clone to release), until the command started, in total."""

    setup_s: float = 0.0
    total_s: float = 0.0


class SandboxResult(msgspec.Struct, frozen=True):
    """The structured result written by ``--json-status``.

    Attributes:
        outcome: ``exited``, ``signaled``, ``limit`` (a limit ended it), ``setup_error``
            (nothing ran) or ``exec_error`` (not found / not executable).
        exit_code: the exit code ``glove exec`` itself returns.
        signal: the signal that ended the command, if any.
        durations: timings.
        limits: every requested limit with its mechanism and whether it was hit.
        output: output accounting.
        error: a human-readable reason for setup, exec and limit outcomes.
        violation: ``seccomp`` when the filter refused a call that is not an expected probe
            (or killed the command with SIGSYS for a foreign-architecture syscall).
        retained: per target inside, the retained image, its size and the bytes used.
        denied_syscalls: how many times each syscall was refused by the seccomp filter,
            expected probes excepted.
        expected_denials: refusals of the documented probes well-behaved programs make
            (``userns_probe``, ``namespace_probe``, ``io_uring_probe``), by probe; they are
            not violations (see ``glove.container._denials``).
        usage: what the tree used (CPU, peak memory, scratch disk).
    """

    outcome: Outcome
    exit_code: int
    signal: int | None = None
    durations: Durations = msgspec.field(default_factory=Durations)
    limits: dict[str, LimitReport] = msgspec.field(default_factory=dict)
    output: OutputReport = msgspec.field(default_factory=OutputReport)
    error: str | None = None
    violation: str | None = None
    retained: dict[str, RetainedReport] = msgspec.field(default_factory=dict)
    denied_syscalls: dict[str, int] = msgspec.field(default_factory=dict)
    expected_denials: dict[str, int] = msgspec.field(default_factory=dict)
    usage: Usage = msgspec.field(default_factory=Usage)

    def to_json(self) -> bytes:
        """Encode as the ``--json-status`` document (one line, newline-terminated)."""
        return msgspec.json.encode(self) + b"\n"


def exit_code_for_signal(signum: int) -> int:
    """The conventional shell exit code for death by ``signum``."""
    return EXIT_SIGNAL_BASE + signum


def setup_failure(message: str, total_s: float = 0.0) -> SandboxResult:
    """The result of a sandbox that could not be built (nothing ran)."""
    return SandboxResult(
        outcome="setup_error",
        exit_code=EXIT_SETUP_FAILED,
        durations=Durations(total_s=total_s),
        error=message,
    )
