"""Faults injected into one gloved session's lifecycle, to prove they stay that session's.

:class:`SessionFault` raises at one lifecycle stage (``prepare``, ``launch`` or
``finalize``; :data:`FAULT_STAGES`) of every session whose plan names one harness. Arm it in
this process with :func:`session_fault` (a context manager), or run a whole gloved with it
armed from the start::

    python -m glove.testing.faulty_gloved --fault launch:boom -- [gloved's own options]

``STAGE:HARNESS:kill`` SIGKILLs gloved itself there instead (a crash test), at any of
:data:`KILL_STAGES`, which include the points between a session's last durable writes.

Why an entry point of its own, and not an environment variable or a ``gloved.toml`` key:
the ``gloved`` console script never imports this package, so in production there is no
setting, variable or control method that arms a fault; a controller can only pick a
harness, never make one fail. Arming takes running code inside gloved's process, which
already owns every session.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final, Literal

from glove.session import FAULT_STAGES, KILL_STAGES, arm_fault_hook

__all__ = [
    "FAULT_STAGES",
    "INJECTED_MESSAGE",
    "KILL_STAGES",
    "InjectedFault",
    "SessionFault",
    "session_fault",
]

#: The message of every injected exception (a test checks it never reaches a controller).
INJECTED_MESSAGE: Final = "glove.testing injected this fault: secret-detail-5c1e"


class InjectedFault(TypeError):
    """What :class:`SessionFault` raises: a ``TypeError``, the kind of bug nothing expects."""


@dataclass
class SessionFault:
    """Raise :class:`InjectedFault` at ``stage`` in every session of harness ``harness``
    (``action="kill"``: SIGKILL this process there instead).

    Attributes:
        stage: one of :data:`FAULT_STAGES` (with ``kill``, of :data:`KILL_STAGES`).
        harness: the harness id whose sessions fail.
        hits: the session ids it raised in, in order.
        action: ``raise`` or ``kill``.
    """

    stage: str
    harness: str
    hits: list[str] = field(default_factory=list)
    action: Literal["raise", "kill"] = "raise"

    def __post_init__(self) -> None:
        """Check the stage.

        Raises:
            ValueError: ``stage`` is not a fault stage (of the action).
        """
        stages = KILL_STAGES if self.action == "kill" else FAULT_STAGES
        if self.stage not in stages:
            raise ValueError(f"stage must be one of {', '.join(stages)}, not {self.stage!r}")

    @classmethod
    def parse(cls, text: str) -> SessionFault:
        """``STAGE:HARNESS`` or ``STAGE:HARNESS:kill`` (the entry point's ``--fault``).

        Raises:
            ValueError: not two non-empty parts (and ``kill``), or an unknown stage.
        """
        stage, sep, rest = text.partition(":")
        harness, _, action = rest.partition(":")
        if not sep or not harness or action not in ("", "kill"):
            raise ValueError(f"a fault is STAGE:HARNESS or STAGE:HARNESS:kill, not {text!r}")
        return cls(stage, harness, action="kill" if action else "raise")

    def __call__(self, stage: str, session_id: str, harness: str) -> None:
        """The hook: raise if this is the stage and the harness.

        Raises:
            InjectedFault: it is.
        """
        if stage == self.stage and harness == self.harness:
            self.hits.append(session_id)
            if self.action == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise InjectedFault(INJECTED_MESSAGE)


@contextmanager
def session_fault(stage: str, harness: str) -> Iterator[SessionFault]:
    """Arm a :class:`SessionFault` in this process for the ``with`` block.

    Raises:
        ValueError: ``stage`` is not a fault stage.
    """
    fault = SessionFault(stage, harness)
    arm_fault_hook(fault)
    try:
        yield fault
    finally:
        arm_fault_hook(None)
