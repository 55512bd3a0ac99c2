"""``glove exec --network proxy``: the sandbox on a session tree, next to its egress proxy.

Offline, ``glove exec`` runs the blocking supervisor (``glove.container.run``). With the
proxy it runs the same session tree as ``glove run`` (:func:`glove.session.run_session`)::

    session-<id>  one_for_all, intensity 0: one strike ends the session
    ├─ audit      AuditLog: the egress audit log (shared between concurrent runs)
    ├─ egress     EgressProxy on the host end of the channel (kinds h, s, d)
    └─ sandbox    SandboxActor: glove-egress (one PID) -> COMMAND

The audit log and the proxy start before the sandbox, so the first connection already has
both; a failure of either while the command runs kills the sandbox (exit 124), one that
happens before it starts means nothing ran (125). The guest end of the channel is closed
here once the sandbox holds it, so the proxy sees the helper's end of file.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import TYPE_CHECKING, Final, NamedTuple

from glove.actors import ChildSpec, Supervisor
from glove.audit import AuditLog
from glove.container import SandboxResult, SandboxSpec
from glove.container.linux import FdWriter, RawTerminal
from glove.egress import EgressProxy, EgressStats
from glove.run._signals import SignalRelay
from glove.session import (
    SANDBOX_CHILD,
    SandboxActor,
    all_started,
    close_once_launched,
    run_session,
    session_result,
    session_tree,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from glove.container.linux import OutputFilter
    from glove.egress import EgressParts, RuleSet

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
    spec: SandboxSpec,
    parts: EgressParts,
    rules: RuleSet,
    audit_path: str,
    session: str,
    *,
    filters: Mapping[int, OutputFilter] | None = None,
) -> ProxiedRun:
    """Run ``spec`` (whose command is the helper) with its proxy; return result and counts.

    ``parts`` is consumed: the proxy owns the host end from here, the guest end is closed
    once the sandbox started (or at the end, whatever happened). Output bound for an fd
    in ``filters`` passes its filter (a terminal's).
    """
    loop = asyncio.get_running_loop()
    audit = AuditLog(audit_path, shared=True)
    proxy = EgressProxy(parts.host_end, rules, audit, session=session, local_names=(spec.hostname,))
    writer = FdWriter({"stdout": 1, "stderr": 2, "pty": 1}, filters)
    ready = loop.create_task(all_started(audit, proxy), name="egress-ready")
    tree = session_tree(
        f"session-{session}",
        [ChildSpec("audit", lambda: audit), ChildSpec("egress", lambda: proxy)],
        ChildSpec(
            SANDBOX_CHILD,
            lambda: SandboxActor(
                spec, on_output=writer.write, stdin=0, winsize_from=0, start_after=ready
            ),
        ),
    )
    closer: asyncio.Task[None] | None = None
    terminal = RawTerminal(0 if spec.pty else None)
    relay = SignalRelay(loop, terminal)

    def started(tree: Supervisor) -> None:
        nonlocal closer
        closer = loop.create_task(close_once_launched(tree, parts.guest_end))
        relay.attach(tree)

    relay.install()
    try:
        with terminal:
            outcome = await run_session(tree, on_started=started)
        await writer.flush()
    except asyncio.CancelledError:
        relay.reraise()  # a Ctrl-C before the command ran: exit 130
        raise
    finally:
        relay.remove()
        for task in (ready, closer):
            if task is not None:
                task.cancel()
        parts.guest_end.close()
        with contextlib.suppress(OSError):
            parts.host_end.close()  # only if the proxy never started (it owns it then)
    result = session_result(outcome, what="the egress proxy or its audit log", whom="the command")
    return ProxiedRun(result, proxy.stats, session)
