"""What a session tree holds besides its sandbox: the MCP mediation, the agent channel, the
egress proxy, and the guest parts the sandbox gets for them (``glove run`` and ``gloved``).

::

    tools only (offline)       tools + network          network only
    ├─ mcp      mediation      ├─ mcp                   ├─ audit   the egress audit log
    ├─ channel  relay's fd 3   ├─ channel (kind c)      ├─ egress  h, s, d
    └─ sandbox  glove-relay    ├─ egress  h, s, d, c    └─ sandbox glove-egress
                               └─ sandbox glove-egress --mcp

One helper process inside the sandbox in every case (it costs one PID of the session's
limit). The sandbox starts only after the mediation is ready and the channel and proxy
have started, so the agent's first connection already has them.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from glove.actors import Actor, ChildSpec, Supervisor, TaskOwner
from glove.session._tree import all_started, close_once_launched

if TYPE_CHECKING:
    from glove.egress import EgressGuest, EgressParts, EgressProxy, RuleSet
    from glove.mcp import GuestSetup, Mediation


class GuestParts(NamedTuple):
    """What the sandbox spec gets: read-only binds ``(host, inside)``, env, fds, argv."""

    binds: tuple[tuple[str, str], ...]
    env: dict[str, str]
    pass_fds: dict[int, int]
    argv: tuple[str, ...]


class SessionWiring:
    """The host side of one session's channels (see the module docstring).

    :func:`glove.session.open_session` builds it before the tree and
    :func:`glove.session.session_children` puts :attr:`before` ahead of the sandbox child,
    which starts after :attr:`ready`; :meth:`started` goes in ``on_started`` and
    :meth:`close` at the end, whatever happened.
    """

    def __init__(
        self,
        *,
        run_id: str,
        mediation: Mediation | None,
        rules: RuleSet | None,
        hostname: str,
        private: Path | None = None,
        audit_path: str | None = None,
    ) -> None:
        """Compose the children for tools (``mediation``), network (``rules``) or both.

        ``private`` is the guest directory ``glove.mcp.prepare_guest_dir`` made (with
        tools); ``audit_path`` is the egress audit log when there is no mediation (whose own
        log then takes the egress records, with the run id).

        Raises:
            OSError: the helper directory or the socketpair cannot be made.
            ValueError: neither tools nor network were asked for, or the audit log is
                missing.
        """
        if mediation is None and rules is None:
            raise ValueError("a session wiring needs tools, a network, or both")
        if mediation is None and audit_path is None:
            # Checked before anything is made: no record, no connection.
            raise ValueError("a network-only session needs an audit log")
        self.before: list[ChildSpec] = []
        self.proxy: EgressProxy | None = None
        self.parts: EgressParts | None = None
        self.waiters = TaskOwner("session-wiring")
        self.guest_end: socket.socket | None = None
        self._host_end: socket.socket | None = None
        self._guest: GuestParts
        self._mcp = mediation is not None
        if mediation is not None:
            self.before.append(ChildSpec("mcp", lambda: mediation.supervisor))
        actors: list[Actor] = []
        if rules is not None:
            self._wire_network(run_id, mediation, rules, hostname, private, audit_path)
            actors = [node for node in (self._channel, self._audit, self.proxy) if node is not None]
        #: The session's one readiness barrier, owned here: the sandbox waits on it.
        self.ready: asyncio.Future[None] = self.waiters.start(
            _all_ready(mediation, *actors),
            name="ready",
            report=False,  # awaited by the tree's readiness barrier, which reads it
        )
        if rules is not None:
            return
        assert mediation is not None
        assert private is not None
        from glove.mcp import GUEST_CHANNEL_FD, AgentChannel, GuestSetup, guest_env

        host_end, self.guest_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._host_end = host_end
        setup = GuestSetup(
            bind_dir=str(private),
            env=guest_env(),
            pass_fds={GUEST_CHANNEL_FD: self.guest_end.fileno()},
        )
        channel = AgentChannel(host_end, mediation)  # it owns the host end now
        self.before.append(ChildSpec("channel", lambda: channel))
        self._relay = setup

    def _wire_network(  # noqa: PLR0917 - the constructor's own arguments, passed on
        self,
        run_id: str,
        mediation: Mediation | None,
        rules: RuleSet,
        hostname: str,
        private: Path | None,
        audit_path: str | None,
    ) -> None:
        from glove.audit import AuditLog
        from glove.egress import UNIX_FAMILIES, EgressProxy, Kind, prepare_egress
        from glove.mcp import CONNECTION_BYTE, AgentChannel, MediationAudit

        self._channel: AgentChannel | None = None
        self._audit: AuditLog | None = None
        self.parts = parts = prepare_egress(private)
        self.guest_end = parts.guest_end
        sink: Any
        other: dict[bytes, Any] = {}
        if mediation is not None:
            channel = AgentChannel(None, mediation)
            self._channel = channel
            sink = MediationAudit(mediation.supervisor, run_id)
            other = {CONNECTION_BYTE: Kind(UNIX_FAMILIES, channel.take)}
            self.before.append(ChildSpec("channel", lambda: channel))
        else:
            assert audit_path is not None  # checked by the constructor
            audit = AuditLog(audit_path, shared=True)
            self._audit = sink = audit
            self.before.append(ChildSpec("audit", lambda: audit))
        self.proxy = proxy = EgressProxy(
            parts.host_end,
            rules,
            sink,
            session=run_id,
            other_kinds=other,
            local_names=(hostname,),
        )
        self.before.append(ChildSpec("egress", lambda: proxy))

    def guest(self, argv: tuple[str, ...]) -> GuestParts:
        """The guest parts for a sandbox whose command is ``argv``."""
        if self.parts is not None:
            return egress_guest(self.parts.guest, argv, mcp=self._mcp)
        return relay_guest(self._relay, argv)

    def started(self, tree: Supervisor) -> None:
        """Once the sandbox holds the guest end, close ours (the proxy then sees the helper's
        end of file); offline the relay's channel stays as it always was."""
        if self.parts is not None and self.guest_end is not None:
            self.waiters.start(close_once_launched(tree, self.guest_end), name="close-guest-end")

    def close(self) -> None:
        """Cancel the waiters and close the guest end (and the host end if never owned:
        a channel that never started never closes it)."""
        self.waiters.cancel()
        if self.guest_end is not None:
            self.guest_end.close()
        if self._host_end is not None:
            self._host_end.close()
        if self.parts is not None:
            self.parts.close()


def egress_guest(guest: EgressGuest, argv: tuple[str, ...], *, mcp: bool) -> GuestParts:
    """The guest parts of a proxied sandbox: the helper directory, the proxy env (and the
    MCP shim's with ``mcp``), the channel as fd 3, ``glove-egress [--mcp] -- ARGV``."""
    from glove.egress import GUEST_DIR

    env = {**(_mcp_env() if mcp else {}), **guest.env}
    return GuestParts(
        ((guest.bind_dir, GUEST_DIR),),
        env,
        dict(guest.pass_fds),
        tuple(guest.command(argv, mcp=mcp)),
    )


def relay_guest(setup: GuestSetup, argv: tuple[str, ...]) -> GuestParts:
    """The guest parts of an offline sandbox with tools: ``glove-relay -- ARGV``."""
    from glove.mcp import GUEST_DIR

    return GuestParts(
        ((setup.bind_dir, GUEST_DIR),),
        dict(setup.env),
        dict(setup.pass_fds),
        tuple(setup.command(argv)),
    )


def _mcp_env() -> dict[str, str]:
    from glove.mcp import guest_env

    return guest_env()


async def _all_ready(mediation: Mediation | None, *actors: Actor) -> None:
    """The session's one readiness barrier: the mediation (if any) is ready and the channel,
    audit log and proxy have started (no connection before the proxy and its log are up):
    waits on the runtime's own ``started``, a supervisor's and the actors'."""
    if mediation is not None:
        await mediation.ready.wait()
    await all_started(*actors)
