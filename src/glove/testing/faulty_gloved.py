"""``python -m glove.testing.faulty_gloved --fault STAGE:HARNESS[:kill] [--] [gloved options]``.

A real ``gloved`` (the same ``main``) with one :class:`~glove.testing.faults.SessionFault`
armed per ``--fault`` before it starts, for tests that prove one session's fault stays that
session's receipt. It exists only here: the production ``gloved`` never arms a fault
(:mod:`glove.testing.faults` says why that is the safe place for the switch).
"""

from __future__ import annotations

import sys

from glove.exits import EXIT_USAGE
from glove.session import FAULT_STAGES, arm_fault_hook
from glove.testing.faults import SessionFault


def _split(argv: list[str]) -> tuple[list[SessionFault], list[str]]:
    """The faults named at the front of ``argv``, and the rest (gloved's own options).

    Raises:
        ValueError: a ``--fault`` without a value, or a malformed one.
    """
    faults: list[SessionFault] = []
    rest = list(argv)
    while rest and rest[0] == "--fault":
        if len(rest) < 2:
            raise ValueError("--fault needs STAGE:HARNESS")
        faults.append(SessionFault.parse(rest[1]))
        rest = rest[2:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    return faults, rest


def main(argv: list[str] | None = None) -> None:
    """Arm the faults, then run gloved's own ``main`` with the remaining arguments."""
    from glove.daemon import main as gloved_main

    try:
        faults, rest = _split(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        stages = "|".join(FAULT_STAGES)
        print(f"faulty_gloved: {exc} (usage: --fault {stages}:HARNESS[:kill] ...)", file=sys.stderr)
        sys.exit(EXIT_USAGE)

    def hook(stage: str, session_id: str, harness: str) -> None:
        for fault in faults:
            fault(stage, session_id, harness)

    arm_fault_hook(hook)
    gloved_main(rest)


if __name__ == "__main__":
    main()
