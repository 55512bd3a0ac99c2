"""Compose the mediator: policy, audit log, upstream actors, kernel and agent endpoints.

The pieces run under one supervisor, ``one_for_all`` with intensity 0, the session rule
of the architecture: one strike (an upstream that dies, an audit log whose fdatasync
failed) tears the whole mediation down. Every call still pending then gets an error
answer before the agent's stream closes.

Traffic that starts at an upstream goes through :class:`_Events`: list changes refresh the
catalog and reach every agent; log messages and resource updates reach the agents when
the policy lets them; server-to-client requests are decided, audited and relayed to the
agent whose request is in flight to that upstream (or the first agent that supports
them); what an upstream's actor drops (non-JSON lines, messages nobody takes) and its
failure are appended to the audit log through :meth:`_Events.record`, which works from
the first byte: the audit log is the tree's first child, so it is open before any
upstream actor starts, and the records carry the run id and policy digest the mediator
will use (both fixed before anything starts).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
import stat
import subprocess
from collections.abc import Callable
from typing import Any, Final

import msgspec

from glove.actors import (
    Actor,
    ActorDead,
    Busy,
    ChildFailed,
    ChildSpec,
    DeadlineExceeded,
    Supervisor,
    race,
    start_node,
)
from glove.exits import EXIT_FAILED, EXIT_OK
from glove.mcp._agent_session import AgentSession
from glove.mcp._catalog import Catalog
from glove.mcp._config import McpConfig
from glove.mcp._contracts import Refusal, arguments_digest
from glove.mcp._endpoint import AgentEndpoint, Notify, ToolsChanged
from glove.mcp._features import client_capabilities as declared_capabilities
from glove.mcp._kernel import RUN_ID_BYTES, ExposedTool, Mediator
from glove.mcp._messages import McpObject, ToolInfo
from glove.mcp._text import printable
from glove.mcp._upstream import CallTool, Forward, UpstreamActor
from glove.mcp.errors import METHOD_NOT_FOUND, McpError, UpstreamError

_log = logging.getLogger(__name__)

STARTUP_MARGIN_S: Final = 5.0
READ_LIMIT_BYTES: Final = 256 * 1024
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: The notifications an upstream may send that reach the agents (when the policy lets them).
RELAYED_NOTIFICATIONS: Final = frozenset(
    {"notifications/message", "notifications/resources/updated"}
)
LIST_CHANGED_METHODS: Final = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}


class Mediation:
    """A mediation session: its supervisor (audit, upstreams, kernel) and, once ready, its
    mediator. Build it with :func:`build_mediation` (to run it as a child of a session tree)
    or :func:`start_mediation` (which runs it on its own)."""

    def __init__(self, supervisor: Supervisor, task: asyncio.Task[None] | None = None) -> None:
        self.supervisor = supervisor
        self._task = task
        self.endpoint: AgentEndpoint | None = None
        self.endpoints: list[AgentEndpoint] = []
        self.mediator: Mediator | None = None
        #: Every live agent session (stdio endpoints and HTTP sessions alike).
        self.sessions: list[AgentSession] = []
        self._attached = 0
        self._first_endpoint = ""
        self._kernel: KernelActor | None = None  # the supervisor's last child (build_mediation)

    @property
    def ready(self) -> asyncio.Event:
        """Set once every upstream has started and the mediator is built: the runtime's own
        ``started`` of the supervisor's last child, the kernel (which builds the mediator as
        it starts, after every upstream has), so whoever waits for it waits on a start, as a
        supervisor does, never on a future of ours."""
        assert self._kernel is not None  # set by build_mediation
        return self._kernel.started

    @property
    def struck(self) -> bool:
        """Whether one of its children has crashed: one strike, the session is over, though
        its supervisor sees the exit only once that child's own teardown (its last audit
        records, its server's end) has run, while the agent has its failure already."""
        return any(node.state == "crashed" for _, node, _ in self.supervisor.children())

    @property
    def failed(self) -> asyncio.Task[None]:
        """The supervisor's task: done when the session has ended (failed or stopped).

        Raises:
            RuntimeError: the mediation runs as a child of another tree (watch that tree).
        """
        if self._task is None:
            raise RuntimeError("this mediation runs inside a session tree: watch the tree")
        return self._task

    def attach(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> AgentEndpoint:
        """Serve one more agent connection; the first becomes :attr:`endpoint`.

        Raises:
            RuntimeError: the session is not running.
        """
        assert self.mediator is not None
        endpoint = AgentEndpoint(reader, writer, self.mediator, on_roots_changed=self.roots_changed)
        self._attached += 1
        self.endpoints.append(endpoint)
        self.sessions.append(endpoint.session)

        def closed(gone: AgentEndpoint) -> None:
            self.endpoints.remove(gone)
            self.sessions.remove(gone.session)

        endpoint.closed_callback = closed
        name = f"endpoint-{self._attached}"
        if self.endpoint is None:
            self.endpoint = endpoint
            self._first_endpoint = name
        self.supervisor.start_child(ChildSpec(name, lambda: endpoint, restart="temporary"))
        return endpoint

    def tools_changed(self) -> None:
        """Tell every connected agent (stdio endpoints and HTTP sessions) that the tool list
        changed."""
        stdio = {id(endpoint.session) for endpoint in self.endpoints}
        for endpoint in list(self.endpoints):
            with contextlib.suppress(ActorDead, Busy):
                endpoint.tell(ToolsChanged())
        for session in list(self.sessions):
            if id(session) not in stdio:
                session.notify("notifications/tools/list_changed")

    def notify_agents(self, method: str, params: McpObject | None = None) -> None:
        """Send every connected agent a notification (stdio endpoints through their actor)."""
        stdio = {id(endpoint.session) for endpoint in self.endpoints}
        for endpoint in list(self.endpoints):
            with contextlib.suppress(ActorDead, Busy):
                endpoint.tell(Notify(method, params))
        for session in list(self.sessions):
            if id(session) not in stdio:
                session.notify(method, params)

    def roots_changed(self) -> None:
        """An agent's roots changed: tell the upstreams that may ask for roots."""
        mediator = self.mediator
        if mediator is None:
            return
        from glove.mcp._upstream import Notify as UpstreamNotify

        for upstream_id, node in self.upstreams.items():
            if mediator.feature_allowed(upstream_id, "roots"):
                with contextlib.suppress(ActorDead, Busy):
                    node.tell(UpstreamNotify("notifications/roots/list_changed"))

    def relay_target(self, upstream_id: str, capability: str) -> AgentSession | None:
        """The agent a server-to-client request of ``upstream_id`` goes to: the one with a
        request in flight to that upstream, else the first that declared ``capability``."""
        capable = [
            s for s in self.sessions if isinstance(s.client_capabilities.get(capability), dict)
        ]
        busy = [s for s in capable if s.busy_with(upstream_id)]
        if busy:
            return busy[-1]
        return capable[0] if capable else None

    @property
    def upstreams(self) -> dict[str, UpstreamActor]:
        """The live upstream actors by configured id."""
        return {
            node.upstream_id: node
            for _, node, _ in self.supervisor.children()
            if isinstance(node, UpstreamActor)
        }

    async def wait(self, interrupt: asyncio.Event | None = None) -> BaseException | None:
        """Wait until the agent hangs up, ``interrupt`` is set or the session fails.

        Returns the session's failure, if it failed; the session is stopped either way.
        """
        assert self.endpoint is not None
        # The endpoint's exit, as its supervisor sees it (its task ends once it has closed).
        hung_up = self.supervisor.child_task(self._first_endpoint)
        if hung_up is not None:
            extra = () if interrupt is None else (interrupt.wait(),)
            await race(hung_up, self.failed, *extra)
        return await self.stop()

    async def stop(self) -> BaseException | None:
        """Tear everything down; return the supervisor's failure, if it failed.

        Raises:
            RuntimeError: the mediation runs as a child of another tree (stop that tree).
        """
        task = self.failed
        if self.supervisor.state == "running" and not self.struck:
            # Only a running supervisor is told to stop: cancelling one that is already
            # tearing down after a failure (or whose crashed child is still in its own
            # teardown, which the supervisor's strike then follows) would cut it short.
            self.supervisor.stop()
        await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the reason is read from the supervisor
        failure = self.supervisor.exit_reason
        if failure is None or isinstance(failure, asyncio.CancelledError):
            return None
        # The child's own error, not the supervisor's escalation of it (whose message is
        # its repr): an upstream's error then shows its stderr lines as they are written.
        if isinstance(failure, ChildFailed):
            while isinstance(failure, ChildFailed) and failure.cause is not None:
                failure = failure.cause
            return failure
        return failure.__cause__ or failure


def _definition_factory() -> Callable[[ToolInfo], Any]:
    from glove.policy import ToolDefinition

    def definition_of(info: ToolInfo) -> Any:
        return ToolDefinition(info.name, info.description, info.input_schema, raw=info.raw)

    return definition_of


class _Events:
    """The mediation's side of every upstream's own traffic (see the module docstring)."""

    def __init__(
        self, mediation: Mediation, catalog: Catalog, run_id: str, policy_digest: str
    ) -> None:
        self._mediation = mediation
        self._catalog = catalog
        self._run_id = run_id
        self._policy_digest = policy_digest

    def _node(self, upstream_id: str) -> UpstreamActor | None:
        node = self._mediation.supervisor.child(f"mcp-{upstream_id}")
        return node if isinstance(node, UpstreamActor) else None

    def list_changed(self, upstream_id: str, kind: str) -> None:
        node = self._node(upstream_id)
        if node is None:
            return
        if kind == "tools":
            self._catalog.set_upstream(upstream_id, tools=node.tools, strict=False)
            self._mediation.tools_changed()
            return
        if kind == "prompts":
            self._catalog.set_upstream(upstream_id, prompts=node.prompts, strict=False)
        else:
            self._catalog.set_upstream(
                upstream_id, resources=node.resources, templates=node.templates, strict=False
            )
        self._mediation.notify_agents(LIST_CHANGED_METHODS[kind])

    def notification(self, upstream_id: str, method: str, params: McpObject) -> str | None:
        if method not in RELAYED_NOTIFICATIONS:
            # Anything else from a server (its own cancellations, ...) stays here.
            return "a notification Glove does not relay"
        mediator = self._mediation.mediator
        if mediator is None:
            return "it came before the mediation was ready"
        if method == "notifications/message":
            shown = mediator.exposed_log(upstream_id, params)
            if shown is None:
                return "a log message the policy keeps from the agents (logging not allowed)"
        else:
            shown = mediator.exposed_update(upstream_id, params)
            if shown is None:
                return "an update of a resource the agents may not read"
        for session in list(self._mediation.sessions):
            session.notify(method, shown, related=session.related_for(upstream_id))
        return None

    async def server_request(self, upstream_id: str, method: str, params: McpObject | None) -> Any:
        mediator = self._mediation.mediator
        if mediator is None:
            # Asked during the upstreams' start-up (server-filesystem asks for roots right
            # after its handshake): refused, and audited like any refusal.
            await self.record(
                upstream_id,
                {
                    "kind": "mcp.server_request",
                    "method": printable(method, 64),
                    "upstream": upstream_id,
                    "params_sha256": arguments_digest(params or {}),
                    "decision": "deny",
                    "reason": "it came before the mediation was ready",
                },
            )
            raise Refusal(METHOD_NOT_FOUND, "Glove relays no server-to-client requests yet")
        capability = await mediator.decide_server_request(upstream_id, method, params)
        session = self._mediation.relay_target(upstream_id, capability)
        if session is None:
            raise Refusal(METHOD_NOT_FOUND, f"no connected agent supports {capability}")
        return await session.request(method, params, related=session.related_for(upstream_id))

    async def record(self, upstream_id: str, record: dict[str, object]) -> None:
        """Append ``record`` to the mediation's audit log, durably (with this run's id and
        the policy's digest, as the mediator's own records).

        Raises:
            AuditError: the log could not record it (``AuditUnavailable`` when it is gone).
        """
        from glove.audit import AuditError, AuditUnavailable

        record.setdefault("run", self._run_id)
        record.setdefault("policy", self._policy_digest)
        try:
            audit = self._mediation.supervisor.child("audit")
            await audit.append(record)  # type: ignore[union-attr]
        except AuditError:
            raise
        except (KeyError, ActorDead, Busy, DeadlineExceeded, RecursionError) as exc:
            raise AuditUnavailable(f"the audit log is unavailable: {exc!r}") from exc


def _load_policy(config: McpConfig) -> Any:
    from glove.policy import allow_all_policy, load_policy

    if config.builtin_policy is not None:
        return allow_all_policy()
    return load_policy(config.policy)


class KernelActor(Actor):
    """The mediation's last child: once every upstream sibling has started, it fills the
    catalog and builds the :class:`Mediator` (policy, audit, forwarding); once it has
    started, so has the mediation (:attr:`Mediation.ready`). An upstream that fails to
    start crashes its actor, which ends the whole mediation (one strike) before this one is
    ready."""

    def __init__(
        self,
        mediation: Mediation,
        config: McpConfig,
        policy: Any,
        catalog: Catalog,
        run_id: str,
    ) -> None:
        super().__init__("kernel", mailbox_size=1)
        self._mediation = mediation
        self._config = config
        self._policy = policy
        self._catalog = catalog
        self._run_id = run_id

    async def on_start(self) -> None:
        """Wait for the upstreams, then fill the catalog and build the mediator.

        Raises:
            McpError: the upstreams did not all start in time.
            ToolNameError: two tools, prompts or resources collide.
        """
        from glove.audit import AuditError

        supervisor, config, catalog = self._mediation.supervisor, self._config, self._catalog
        limit = max(u.startup_timeout_s for u in config.upstreams.values()) + STARTUP_MARGIN_S
        nodes = [supervisor.child(f"mcp-{uid}") for uid in config.upstreams]
        await wait_started([*nodes, supervisor.child("audit")], limit)
        for upstream_id in config.upstreams:
            node = supervisor.child(f"mcp-{upstream_id}")
            assert isinstance(node, UpstreamActor)
            catalog.set_upstream(
                upstream_id,
                tools=node.tools,
                prompts=node.prompts,
                resources=node.resources,
                templates=node.templates,
                strict=True,
            )
        timeouts = {key: value.call_timeout_s for key, value in config.upstreams.items()}

        async def forward(
            tool: ExposedTool,
            arguments: McpObject | msgspec.Raw | None,
            token: int | str | None,
            progress: Callable[[McpObject], None] | None,
        ) -> msgspec.Raw:
            node = supervisor.child(f"mcp-{tool.upstream_id}")
            result: msgspec.Raw = await node.ask(  # type: ignore[union-attr]
                CallTool(tool.info.name, arguments, token, progress),
                timeout=timeouts[tool.upstream_id],
            )
            return result

        async def request(
            upstream_id: str,
            method: str,
            params: McpObject | None,
            token: int | str | None,
            progress: Callable[[McpObject], None] | None,
        ) -> msgspec.Raw:
            node = supervisor.child(f"mcp-{upstream_id}")
            result: msgspec.Raw = await node.ask(  # type: ignore[union-attr]
                Forward(method, params, token, progress), timeout=timeouts[upstream_id]
            )
            return result

        def capabilities_of(upstream_id: str) -> McpObject:
            node = supervisor.child(f"mcp-{upstream_id}")
            return node.capabilities if isinstance(node, UpstreamActor) else {}

        self._mediation.mediator = Mediator(
            catalog.tools,
            self._policy,
            supervisor.child("audit"),  # type: ignore[arg-type]
            forward,
            _definition_factory(),
            # A record the encoder cannot write (nested too deeply) is refused like any failure.
            audit_errors=(AuditError, ActorDead, Busy, DeadlineExceeded, RecursionError),
            upstream_errors=(UpstreamError, ActorDead, Busy, KeyError),
            timeout_errors=(DeadlineExceeded,),
            run_id=self._run_id,
            catalog=catalog,
            request=request,
            upstream_capabilities=capabilities_of,
        )


async def wait_started(nodes: list[Actor | Supervisor], limit_s: float) -> None:
    """Wait until every node has started.

    Raises:
        McpError: they did not all start within ``limit_s``.
    """
    try:
        async with asyncio.timeout(limit_s):
            for node in nodes:
                await node.started.wait()
    except TimeoutError as exc:
        raise McpError(f"the upstreams did not start within {limit_s:.0f} s") from exc


def build_mediation(
    config: McpConfig,
    *,
    audit_factory: Callable[[str], Any] | None = None,
    client_capabilities: McpObject | None = None,
    run_id: str | None = None,
    prestarted: dict[str, subprocess.Popen[bytes]] | None = None,
) -> Mediation:
    """Build (not start) the mediation tree: ``audit``, one ``mcp-<id>`` per upstream, then
    the ``kernel``. Run :attr:`Mediation.supervisor` as a child of a session tree and wait
    for :attr:`Mediation.ready` before attaching agents.

    ``audit_factory(path)`` builds the audit actor (default: a shared
    :class:`glove.audit.AuditLog`); tests inject failing storage through it.
    ``client_capabilities``, when the agent's are known before the upstreams start (an HTTP
    session), narrows what Glove declares upstream to what that agent supports. ``run_id``
    names the run in audit records (default: a fresh one). ``prestarted`` holds upstream
    processes already started.

    Raises:
        PolicyFileError: the policy file is invalid.
    """
    from glove.audit import AuditLog

    policy = _load_policy(config)
    run = run_id or secrets.token_hex(RUN_ID_BYTES)

    def shared_log(path: str) -> AuditLog:
        # Shared: two runs with one configuration take turns on its log (their records say
        # which run wrote them), instead of the second one failing to start.
        return AuditLog(path, shared=True)

    make_audit = audit_factory or shared_log
    catalog = Catalog({uid: upstream.expose for uid, upstream in config.upstreams.items()})
    specs = [ChildSpec("audit", lambda: make_audit(config.audit))]

    def make_upstream(upstream_id: str, upstream: Any) -> UpstreamActor:
        return UpstreamActor(
            upstream_id,
            upstream,
            events=events,
            client_capabilities=declared_capabilities(policy, upstream_id, client_capabilities),
            process=None if prestarted is None else prestarted.pop(upstream_id, None),
        )

    for upstream_id, upstream in config.upstreams.items():
        specs.append(
            ChildSpec(
                f"mcp-{upstream_id}",
                lambda i=upstream_id, u=upstream: make_upstream(i, u),  # type: ignore[misc]
            )
        )
    # The factories run when the supervisor starts, after `kernel` below exists; one built
    # ahead is enough: the tree is one strike (intensity 0), never restarted.
    specs.append(ChildSpec("kernel", lambda: kernel))
    supervisor = Supervisor("mcp", specs, strategy="one_for_all", intensity=0)
    mediation = Mediation(supervisor)
    kernel = KernelActor(mediation, config, policy, catalog, run)
    mediation._kernel = kernel
    events = _Events(mediation, catalog, run, policy.digest)
    return mediation


async def start_mediation(
    config: McpConfig,
    reader: asyncio.StreamReader | None = None,
    writer: asyncio.StreamWriter | None = None,
    *,
    audit_factory: Callable[[str], Any] | None = None,
    client_capabilities: McpObject | None = None,
    run_id: str | None = None,
    prestarted: dict[str, subprocess.Popen[bytes]] | None = None,
) -> Mediation:
    """Start the upstreams and the audit log, build the catalog, then serve the agent.

    Without ``reader`` and ``writer`` no agent is attached yet: call
    :meth:`Mediation.attach` for each connection, or register an
    :class:`~glove.mcp._agent_session.AgentSession` in :attr:`Mediation.sessions` (the HTTP
    front does). The other arguments are :func:`build_mediation`'s.

    Raises:
        GloveError: the policy file is invalid (``PolicyFileError``), an upstream failed to
            start, or two tools, prompts or resources collide (``ToolNameError``); nothing
            is left running.
    """
    mediation = build_mediation(
        config,
        audit_factory=audit_factory,
        client_capabilities=client_capabilities,
        run_id=run_id,
        prestarted=prestarted,
    )
    task = start_node(mediation.supervisor, name="mcp-supervisor")
    mediation._task = task
    try:
        await race(task, mediation.ready.wait())
    except BaseException:
        await mediation.stop()
        raise
    if not mediation.ready.is_set():
        await mediation.stop()
        raise startup_failure(mediation.supervisor)
    if reader is not None and writer is not None:
        mediation.attach(reader, writer)
    return mediation


def startup_failure(supervisor: Supervisor) -> Exception:
    """Why a mediation ended before it was ready: its first child's failure."""
    nodes = [node for _, node, _ in supervisor.children()]
    failure = next((n.exit_reason for n in nodes if n.exit_reason is not None), None)
    if failure is None and supervisor.exit_reason is not None:
        failure = supervisor.exit_reason.__cause__ or supervisor.exit_reason
    if isinstance(failure, Exception) and not isinstance(failure, asyncio.CancelledError):
        return failure
    return McpError("the mediation failed to start")


def _stdio_is_one_socket() -> bool:
    """Check stdin/stdout are usable streams; True when both are the same socket.

    Raises:
        McpError: stdin or stdout is not a pipe, socket or terminal.
    """
    for fd, name in ((0, "stdin"), (1, "stdout")):
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)):
            raise McpError(
                f"{name} must be a pipe, a socket or a terminal: an MCP client launches "
                "`glove mcp serve` with pipes"
            )
    return stat.S_ISSOCK(os.fstat(0).st_mode) and os.path.sameopenfile(0, 1)


async def stdio_streams() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Wrap this process's stdin and stdout as asyncio streams for the agent.

    File descriptor 1 is then pointed at stderr, so nothing printed by accident can
    corrupt the protocol stream.

    Raises:
        McpError: stdin or stdout is not a pipe, socket or terminal (the way MCP clients
            launch a stdio server).
    """
    if _stdio_is_one_socket():
        return await socket_streams(_steal_stdout())
    return await fd_streams(os.dup(0), _steal_stdout())


def _steal_stdout() -> int:
    out = os.dup(1)
    os.dup2(2, 1)
    return out


async def socket_streams(fd: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Wrap an owned connected stream socket (``glove run``'s socketpair end) as streams."""
    sock = socket.socket(fileno=fd)
    return await asyncio.open_connection(sock=sock, limit=READ_LIMIT_BYTES)


async def fd_streams(
    read_fd: int, write_fd: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Wrap two owned pipe descriptors (stdin and stdout) as streams.

    A socket needs :func:`socket_streams`: a write-pipe transport reads a socket to detect
    that the peer closed, and would take the agent's first request for a hang-up.
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT_BYTES)
    read_file = os.fdopen(read_fd, "rb", buffering=0)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), read_file)
    write_file = os.fdopen(write_fd, "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), write_file
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    return reader, writer


async def serve(
    config: McpConfig,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    prestarted: dict[str, subprocess.Popen[bytes]] | None = None,
) -> int:
    """Serve one agent until it hangs up or a stop signal comes (0), or the session fails (1).

    Raises:
        GloveError: startup failed (invalid policy, upstream, tool name collision).
    """
    mediation = await start_mediation(config, reader, writer, prestarted=prestarted)
    interrupt = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        # A signal stops the session cleanly, so the upstreams' process groups are ended
        # (stdin EOF, SIGTERM, SIGKILL) instead of orphaned.
        loop.add_signal_handler(signum, interrupt.set)
    try:
        failure = await mediation.wait(interrupt)
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)
    if failure is not None:
        _log.error("glove mcp: the session failed: %s", failure)
        return EXIT_FAILED
    return EXIT_OK
