"""``glove exec --network proxy``: the sandbox on a session tree, next to its egress proxy.

Offline, ``glove exec`` runs the blocking supervisor (``glove.container.run``). With the
proxy it runs the session tree :mod:`glove.session` builds for ``glove run`` and gloved,
from a description with a network and no tools::

    session-<id>  one_for_all, intensity 0: one strike ends the session
    ├─ audit      AuditLog: the egress audit log (shared between concurrent runs)
    ├─ egress     EgressProxy on the host end of the channel (kinds h, s, d)
    └─ sandbox    SandboxActor: glove-egress (one PID) -> COMMAND

The audit log and the proxy start before the sandbox, so the first connection already has
both; a failure of either while the command runs kills the sandbox (exit 124), one that
happens before it starts means nothing ran (125). This module supplies the spec and the
terminal; the session closes its guest end once the sandbox holds it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, NamedTuple

from glove.container import SandboxResult, SandboxSpec
from glove.egress import EgressStats
from glove.run._foreground import TerminalForeground
from glove.session import (
    GuestParts,
    SessionDescription,
    open_session,
    run_foreground,
    session_result,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from glove.container.linux import OutputFilter

#: Random bytes of an exec session's id (hex in every audit record).
SESSION_ID_BYTES: Final = 8
#: The prefix of a proxied ``glove exec`` session's id in the audit log.
SESSION_PREFIX: Final = "exec-"


class ProxiedRun(NamedTuple):
    """How a proxied run ended: the command's result and what the proxy counted."""

    result: SandboxResult
    egress: EgressStats
    session: str


def new_session_id() -> str:
    """A fresh id for one proxied ``glove exec`` (``exec-<16 hex>``)."""
    return SESSION_PREFIX + secrets.token_hex(SESSION_ID_BYTES)


async def run_proxied(
    description: SessionDescription,
    argv: tuple[str, ...],
    spec_for: Callable[[GuestParts], SandboxSpec],
    before_run: Callable[[SandboxSpec], Mapping[int, OutputFilter]],
) -> ProxiedRun:
    """Run ``argv`` behind the helper in the sandbox ``spec_for`` makes from the session's
    guest parts, with its proxy; return the result and the counts.

    ``before_run(spec)`` is called once the spec is made, before anything starts (the
    notes); it returns the filters output bound for a host fd passes (a terminal's).

    Raises:
        SandboxError: ``spec_for`` refused the spec (nothing started).
        OSError: the helper directory or the channel cannot be made.
    """
    parts = await open_session(description)
    try:
        guest = parts.guest(argv)
        assert guest is not None  # a network always has guest parts
        spec = spec_for(guest)
        foreground = TerminalForeground(pty=spec.pty, filters=before_run(spec))
        outcome = await run_foreground(parts, spec, foreground)
    finally:
        await parts.close()
    proxy = parts.proxy
    assert proxy is not None
    result = session_result(outcome, what="the egress proxy or its audit log", whom="the command")
    return ProxiedRun(result, proxy.stats, description.session_id)
