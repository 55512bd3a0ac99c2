"""Compose the mediator: policy, audit log, upstream actors, kernel and agent endpoint.

The pieces run under one supervisor, ``one_for_all`` with intensity 0, the session rule
of the architecture: one strike (an upstream that dies, an audit log whose fdatasync
failed) tears the whole mediation down. Every call still pending then gets an error
answer before the agent's stream closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import stat
from collections.abc import Callable
from typing import Any, Final

import msgspec

from glove.actors import Actor, ActorDead, Busy, ChildSpec, DeadlineExceeded, Supervisor
from glove.mcp._config import McpConfig
from glove.mcp._endpoint import AgentEndpoint, ToolsChanged
from glove.mcp._kernel import ExposedTool, Mediator, ToolRegistry
from glove.mcp._messages import ToolInfo
from glove.mcp._upstream import CallTool, UpstreamActor
from glove.mcp.errors import McpError, UpstreamError

_log = logging.getLogger(__name__)

STARTUP_MARGIN_S: Final = 5.0
READ_LIMIT_BYTES: Final = 256 * 1024
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


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
        self._attached = 0
        self.registry: ToolRegistry | None = None
        #: Resolved once every upstream has started and the mediator is built.
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

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
        endpoint = AgentEndpoint(reader, writer, self.mediator)
        self._attached += 1
        self.endpoints.append(endpoint)
        endpoint.closed_callback = self.endpoints.remove
        if self.endpoint is None:
            self.endpoint = endpoint
        self.supervisor.start_child(
            ChildSpec(f"endpoint-{self._attached}", lambda: endpoint, restart="temporary")
        )
        return endpoint

    def tools_changed(self) -> None:
        """Tell every connected agent that the tool list changed."""
        for endpoint in list(self.endpoints):
            with contextlib.suppress(ActorDead, Busy):
                endpoint.tell(ToolsChanged())

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
        waits = {asyncio.ensure_future(self.endpoint.closed.wait())}
        if interrupt is not None:
            waits.add(asyncio.ensure_future(interrupt.wait()))
        try:
            await asyncio.wait({*waits, self.failed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()
        return await self.stop()

    async def stop(self) -> BaseException | None:
        """Tear everything down; return the supervisor's failure, if it failed.

        Raises:
            RuntimeError: the mediation runs as a child of another tree (stop that tree).
        """
        task = self.failed
        if self.supervisor.state == "running":
            # Only a running supervisor is told to stop: cancelling one that is already
            # tearing down after a failure would cut its teardown short.
            self.supervisor.stop()
        await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the reason is read from the supervisor
        failure = self.supervisor.exit_reason
        if failure is None or isinstance(failure, asyncio.CancelledError):
            return None
        return failure.__cause__ or failure


def _definition_factory() -> Callable[[ToolInfo], Any]:
    from glove.policy import ToolDefinition

    def definition_of(info: ToolInfo) -> Any:
        return ToolDefinition(info.name, info.description, info.input_schema, raw=info.raw)

    return definition_of


class KernelActor(Actor):
    """The mediation's last child: once every upstream sibling has started, it builds the
    tool registry and the :class:`Mediator` (policy, audit, forwarding) and resolves
    :attr:`Mediation.ready`. An upstream that fails to start crashes its actor, which ends
    the whole mediation (one strike) before this one is ready."""

    def __init__(
        self, mediation: Mediation, config: McpConfig, policy: Any, run_id: str | None = None
    ) -> None:
        super().__init__("kernel", mailbox_size=1)
        self._mediation = mediation
        self._config = config
        self._policy = policy
        self._run_id = run_id

    async def on_start(self) -> None:
        """Wait for the upstreams, then build the registry and the mediator.

        Raises:
            McpError: the upstreams did not all start in time.
            ToolNameError: two tools collide.
        """
        from glove.audit import AuditError

        supervisor, config = self._mediation.supervisor, self._config
        limit = max(u.startup_timeout_s for u in config.upstreams.values()) + STARTUP_MARGIN_S
        nodes = [supervisor.child(f"mcp-{uid}") for uid in config.upstreams]
        await wait_started([*nodes, supervisor.child("audit")], limit)
        registry = ToolRegistry()
        for uid in config.upstreams:
            node = supervisor.child(f"mcp-{uid}")
            assert isinstance(node, UpstreamActor)
            registry.set_upstream(uid, node.tools, strict=True)
        self._mediation.registry = registry
        timeouts = {key: value.call_timeout_s for key, value in config.upstreams.items()}

        async def forward(
            tool: ExposedTool,
            arguments: dict[str, Any] | None,
            token: int | str | None,
            progress: Callable[[dict[str, Any]], None] | None,
        ) -> msgspec.Raw:
            node = supervisor.child(f"mcp-{tool.upstream_id}")
            result: msgspec.Raw = await node.ask(  # type: ignore[union-attr]
                CallTool(tool.info.name, arguments, token, progress),
                timeout=timeouts[tool.upstream_id],
            )
            return result

        self._mediation.mediator = Mediator(
            registry,
            self._policy,
            supervisor.child("audit"),  # type: ignore[arg-type]
            forward,
            _definition_factory(),
            # A record the encoder cannot write (nested too deeply) is refused like any failure.
            audit_errors=(AuditError, ActorDead, Busy, DeadlineExceeded, RecursionError),
            upstream_errors=(UpstreamError, ActorDead, Busy, KeyError),
            timeout_errors=(DeadlineExceeded,),
            run_id=self._run_id,
        )
        if not self._mediation.ready.done():
            self._mediation.ready.set_result(None)


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
    run_id: str | None = None,
) -> Mediation:
    """Build (not start) the mediation tree: ``audit``, one ``mcp-<id>`` per upstream, then
    the ``kernel``. Run :attr:`Mediation.supervisor` as a child of a session tree and await
    :attr:`Mediation.ready` before attaching agents. ``run_id`` names the run in every audit
    record (a fresh one by default).

    ``audit_factory(path)`` builds the audit actor (default: a shared
    :class:`glove.audit.AuditLog`); tests inject failing storage through it.

    Raises:
        PolicyFileError: the policy file is invalid.
    """
    from glove.audit import AuditLog
    from glove.policy import load_policy

    policy = load_policy(config.policy)

    def shared_log(path: str) -> AuditLog:
        # Shared: two runs with one configuration take turns on its log (their records say
        # which run wrote them), instead of the second one failing to start.
        return AuditLog(path, shared=True)

    make_audit = audit_factory or shared_log

    def tools_changed(upstream_id: str) -> None:
        node = supervisor.child(f"mcp-{upstream_id}")
        assert isinstance(node, UpstreamActor)
        if mediation.registry is not None:
            mediation.registry.set_upstream(upstream_id, node.tools, strict=False)
        mediation.tools_changed()

    specs = [ChildSpec("audit", lambda: make_audit(config.audit))]
    for upstream_id, upstream in config.upstreams.items():
        specs.append(
            ChildSpec(
                f"mcp-{upstream_id}",
                lambda i=upstream_id, u=upstream: UpstreamActor(  # type: ignore[misc]
                    i, u, on_tools_changed=tools_changed
                ),
            )
        )
    # The factories run when the supervisor starts, after `mediation` below exists.
    specs.append(ChildSpec("kernel", lambda: KernelActor(mediation, config, policy, run_id)))
    supervisor = Supervisor("mcp", specs, strategy="one_for_all", intensity=0)
    mediation = Mediation(supervisor)
    return mediation


async def start_mediation(
    config: McpConfig,
    reader: asyncio.StreamReader | None = None,
    writer: asyncio.StreamWriter | None = None,
    *,
    audit_factory: Callable[[str], Any] | None = None,
) -> Mediation:
    """Start the upstreams and the audit log, build the registry, then serve the agent.

    Without ``reader`` and ``writer`` no agent is attached yet: call
    :meth:`Mediation.attach` for each connection.

    Raises:
        GloveError: the policy file is invalid (``PolicyFileError``), an upstream failed to
            start, or two tools collide (``ToolNameError``); nothing is left running.
    """
    mediation = build_mediation(config, audit_factory=audit_factory)
    task = asyncio.get_running_loop().create_task(mediation.supervisor.run(), name="mcp-supervisor")
    mediation._task = task
    try:
        await asyncio.wait({mediation.ready, task}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        await mediation.stop()
        raise
    if not mediation.ready.done():
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
    config: McpConfig, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> int:
    """Serve one agent until it hangs up or a stop signal comes (0), or the session fails (1).

    Raises:
        GloveError: startup failed (invalid policy, upstream, tool name collision).
    """
    mediation = await start_mediation(config, reader, writer)
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
        return 1
    return 0
