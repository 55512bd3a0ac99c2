"""The one builder of a ``session-<id>`` tree, for ``glove run``, a proxied ``glove exec``
and gloved alike.

A :class:`SessionDescription` says what a session is mediated by: its tools (an MCP
configuration), its network (egress rules) and, without tools, the egress audit log.
:func:`open_session` makes the host-side parts it needs (the mediation, the guest directory,
the channel, the audit log, the proxy), none started yet, as :class:`SessionParts`; their
:meth:`~SessionParts.guest` parts go into the sandbox spec. :func:`session_children` then
gives the tree's children in the one fixed order::

    session-<id>    Supervisor one_for_all, intensity 0 (session_tree)
    ├─ evaluator    the front actors the caller owns (gloved's evaluator and drain),
    ├─ drain        in the order given
    ├─ mcp          the mediation (audit, mcp-<ext> upstreams, kernel), with tools
    ├─ channel      AgentChannel, with tools
    ├─ audit        the egress audit log, with a network and no tools
    ├─ egress       EgressProxy, with a network
    └─ sandbox      SandboxActor: started only once the one readiness barrier
                    (SessionWiring.ready: the mediation ready, channel, audit and proxy
                    started) has passed

A foreground command supplies only a :class:`Foreground` (terminal I/O and signal
forwarding, ``glove.run``'s) and :func:`run_foreground` does the rest; gloved runs the tree
under its ``sessions`` supervisor with :func:`glove.session.run_session` itself.
Teardown is the tree's reverse start order (the sandbox first, the audit logs and the
drain last), then :meth:`SessionParts.close`.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from glove.actors import Actor, ChildSpec, Supervisor
from glove.container import DEFAULT_HOSTNAME, FileProjection, SandboxSpec
from glove.session._sandbox import SandboxActor
from glove.session._tree import SANDBOX_CHILD, SessionOutcome, run_session, session_tree
from glove.session._wiring import GuestParts, SessionWiring

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from glove.container.linux import OutputHandler
    from glove.egress import EgressProxy, RuleSet
    from glove.mcp import McpConfig, Mediation


@dataclass(frozen=True)
class SessionDescription:
    """What one session is mediated by; everything its host-side children are built from.

    Attributes:
        session_id: the tree is ``session-<session_id>``; every audit record of the
            session carries it (as the run id under tools, the session under egress).
        mcp: the MCP configuration of its tools (the mediation's audit log is its
            ``audit``), or None.
        rules: the egress rules of a ``proxy`` network, or None (no network).
        hostname: the sandbox's host name (the proxy's DNS answers it with loopback).
        audit_path: the egress audit log when there are no tools (shared between runs).
    """

    session_id: str
    mcp: McpConfig | None = None
    rules: RuleSet | None = None
    hostname: str = DEFAULT_HOSTNAME
    audit_path: str | None = None


@dataclass(frozen=True)
class SandboxLaunch:
    """The sandbox child: its spec, where its output goes, its terminal and projections."""

    spec: SandboxSpec
    on_output: OutputHandler
    stdin: int | None = None
    winsize_from: int | None = None
    terminal_size: tuple[int, int] | None = None
    projections: tuple[FileProjection, ...] = ()


class SessionParts:
    """The host-side parts of one :class:`SessionDescription`, built and not started.

    Made by :func:`open_session`; :meth:`close` releases them, whatever happened.
    """

    def __init__(
        self,
        description: SessionDescription,
        mediation: Mediation | None = None,
        wiring: SessionWiring | None = None,
        private: Path | None = None,
    ) -> None:
        """Hold the parts (:func:`open_session` makes them)."""
        self.description = description
        self.mediation = mediation
        self.wiring = wiring
        self.private = private
        self._closed = False

    @property
    def proxy(self) -> EgressProxy | None:
        """The egress proxy, with a network."""
        return self.wiring.proxy if self.wiring is not None else None

    def guest(self, argv: tuple[str, ...]) -> GuestParts | None:
        """What the sandbox spec gets for a command ``argv`` (None: nothing mediated)."""
        return self.wiring.guest(argv) if self.wiring is not None else None

    def children(self, launch: SandboxLaunch, front: Sequence[Actor] = ()) -> list[ChildSpec]:
        """The tree's children in the fixed order (:func:`session_children`)."""
        return session_children(launch, parts=self, front=front)

    def tree(self, launch: SandboxLaunch, front: Sequence[Actor] = ()) -> Supervisor:
        """The ``session-<id>`` supervisor (:func:`build_session`)."""
        return build_session(self.description.session_id, launch, parts=self, front=front)

    def started(self, tree: Supervisor) -> None:
        """Call from ``on_started``: the guest end is closed once the sandbox holds it."""
        if self.wiring is not None:
            self.wiring.started(tree)

    async def close(self) -> None:
        """Close the channel ends and remove the guest directory (idempotent; the counts
        stay readable)."""
        if self._closed:
            return
        self._closed = True
        private = self.private
        if self.wiring is not None:
            self.wiring.close()
            if private is None and self.wiring.parts is not None:
                private = Path(self.wiring.parts.guest.bind_dir)  # the egress helper's own
        if private is not None:
            await asyncio.to_thread(shutil.rmtree, private, True)


async def open_session(description: SessionDescription) -> SessionParts:
    """Build the host-side parts ``description`` asks for (nothing is started).

    Raises:
        GloveError: the MCP configuration's policy is invalid.
        OSError: the guest directory or the channel cannot be made.
        ValueError: a network without tools has no audit log.
    """
    if description.mcp is None and description.rules is None:
        return SessionParts(description)
    mediation = None
    private = None
    if description.mcp is not None:
        from glove.mcp import build_mediation, prepare_guest_dir

        mediation = build_mediation(description.mcp, run_id=description.session_id)
        # Without a network the relay carries MCP; with one, the egress helper (--mcp).
        private = await asyncio.to_thread(prepare_guest_dir, relay=description.rules is None)
    try:
        wiring = SessionWiring(
            run_id=description.session_id,
            mediation=mediation,
            rules=description.rules,
            hostname=description.hostname,
            private=private,
            audit_path=description.audit_path,
        )
    except BaseException:
        if private is not None:
            await asyncio.to_thread(shutil.rmtree, private, True)
        raise
    return SessionParts(description, mediation, wiring, private)


def session_children(
    launch: SandboxLaunch,
    *,
    parts: SessionParts | None = None,
    front: Sequence[Actor] = (),
) -> list[ChildSpec]:
    """The children of a session tree, in the order the module docstring draws.

    ``front`` are the caller's actors that start first (gloved's evaluator and drain);
    ``parts`` (None: nothing mediated) the host side; the sandbox is last and launches only
    after the parts' one readiness barrier.
    """
    children = [ChildSpec(actor.name, _given(actor)) for actor in front]
    wiring = parts.wiring if parts is not None else None
    ready = None
    if wiring is not None:
        children += wiring.before
        ready = wiring.ready

    def sandbox() -> SandboxActor:
        return SandboxActor(
            launch.spec,
            on_output=launch.on_output,
            stdin=launch.stdin,
            winsize_from=launch.winsize_from,
            terminal_size=launch.terminal_size,
            start_after=ready,
            projections=launch.projections,
        )

    return [*children, ChildSpec(SANDBOX_CHILD, sandbox)]


def _given(actor: Actor) -> Callable[[], Actor]:
    """A child factory that hands over an actor the caller made."""
    return lambda: actor


def build_session(
    session_id: str,
    launch: SandboxLaunch,
    *,
    parts: SessionParts | None = None,
    front: Sequence[Actor] = (),
    name: str | None = None,
) -> Supervisor:
    """The ``session-<session_id>`` supervisor over :func:`session_children` (one strike);
    ``name`` another name for it (gloved's ``contained``, under the session's driver)."""
    *before, sandbox = session_children(launch, parts=parts, front=front)
    return session_tree(name or f"session-{session_id}", before, sandbox)


class Foreground(Protocol):
    """What a foreground command (``glove run``, a proxied ``glove exec``) supplies to its
    session: terminal I/O and signal forwarding. ``glove.run`` has the one implementation."""

    def launch(self, spec: SandboxSpec) -> SandboxLaunch:
        """The sandbox child for ``spec``: its output to the host's descriptors, its stdin
        and window size from the host's."""
        ...

    def attach(self, tree: Supervisor) -> None:
        """The tree's sandbox runs: pass the operator's signals on to it from now on."""
        ...

    def running(self) -> AbstractAsyncContextManager[None]:
        """For the session's run: the operator's signals taken, the terminal in its mode,
        the output flushed at the end; a signal that cancelled the run leaves as itself."""
        ...


async def run_foreground(
    parts: SessionParts, spec: SandboxSpec, foreground: Foreground
) -> SessionOutcome:
    """Build the tree of ``parts`` with ``spec``'s sandbox and run it in the foreground.

    The caller closes ``parts`` afterwards (:meth:`SessionParts.close`).

    Raises:
        KeyboardInterrupt: the operator's INT ended the session before its sandbox ran.
        SystemExit: TERM, HUP or QUIT did (128 + its number).
    """
    tree = parts.tree(foreground.launch(spec))

    def started(tree: Supervisor) -> None:
        foreground.attach(tree)
        parts.started(tree)

    async with foreground.running():
        return await run_session(tree, on_started=started)
