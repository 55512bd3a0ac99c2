"""Fault points in a gloved session's lifecycle: inert unless a test arms them.

The registry calls :func:`fault_point` at three places of every session's lifecycle (its
``prepare``, its ``launch`` once the sandbox runs, its ``finalize`` before the receipt is
built), where a hook may raise, and at three more between its last durable writes
(:data:`KILL_STAGES`: ``receipt`` once the receipt is durable, ``checkpoint`` once it is
sealed, ``terminal`` once the terminal state is shown), where a hook may only kill the
process (a crash test: an exception there is the registry's, not the session's).

Unarmed, which is how the ``gloved`` console script always runs, it does nothing:
nothing in the production entry point, ``gloved.toml`` or the environment arms it, and no
control method or plan can. Only code running inside gloved's own process can call
:func:`arm_fault_hook` (``glove.testing.faults`` does, for the fault-injection entry point
``python -m glove.testing.faulty_gloved``), and such code already owns the daemon.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

#: The lifecycle stages that have a fault point, in the order a session reaches them.
FAULT_STAGES: Final = ("prepare", "launch", "finalize")
#: Every stage with a fault point, in order: where a test may kill gloved (kill -9).
KILL_STAGES: Final = (*FAULT_STAGES, "receipt", "checkpoint", "terminal")

#: Called with (stage, session id, harness id); raising is the injected fault.
FaultHook = Callable[[str, str, str], None]

_armed: FaultHook | None = None


def arm_fault_hook(hook: FaultHook | None) -> None:
    """Arm ``hook`` at every fault point of this process (None disarms)."""
    global _armed
    _armed = hook


def fault_point(stage: str, session_id: str, harness: str) -> None:
    """A place where an armed test hook may raise; a no-op otherwise.

    Raises:
        Exception: whatever the armed hook raises (never, unarmed).
    """
    hook = _armed
    if hook is not None:
        hook(stage, session_id, harness)
