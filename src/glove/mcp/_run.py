"""``glove run``: an agent in the sandbox, its MCP tools mediated on the host.

The host side starts the mediation (upstreams, policy, audit) and listens on a Unix socket
in a fresh private directory (mode 0700) that also holds the stdio shim. The directory is
bound **read-only** into the sandbox at :data:`GUEST_DIR`; the agent finds

* ``/opt/glove/glove-mcp``: a stdio MCP server command (``GLOVE_MCP_COMMAND``), run by the
  sandbox's ``/usr/bin/python3``;
* ``/opt/glove/mcp.sock``: the mediator's socket (``GLOVE_MCP_SOCKET``).

Every connection is one agent-facing endpoint on the host. Nothing of the upstreams
(processes, files, sockets) is visible inside: they run in the host's namespaces, the
sandbox has its own pid, mount and (route-less) network namespaces, and the socket is the
only way out.

Why a bound socket and not an inherited descriptor: stock MCP clients close every
descriptor above 2 when they spawn a stdio server (Python's ``close_fds``), so a
descriptor handed to the agent never reaches the server process it launches.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import tempfile
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Final

from glove.mcp._config import McpConfig
from glove.mcp._service import start_mediation

GUEST_DIR: Final = "/opt/glove"
SHIM_NAME: Final = "glove-mcp"
SOCKET_NAME: Final = "mcp.sock"
LISTEN_BACKLOG: Final = 16
ENV_COMMAND: Final = "GLOVE_MCP_COMMAND"
ENV_SOCKET: Final = "GLOVE_MCP_SOCKET"

SandboxRunner = Callable[[str, dict[str, str]], Awaitable[int]]
"""``await runner(bind_dir, env)``: run the sandbox with ``bind_dir`` bound read-only at
:data:`GUEST_DIR` and ``env`` added to its environment; return the exit code."""


def guest_env() -> dict[str, str]:
    """The variables that tell the agent where its MCP server is."""
    return {
        ENV_COMMAND: f"{GUEST_DIR}/{SHIM_NAME}",
        ENV_SOCKET: f"{GUEST_DIR}/{SOCKET_NAME}",
    }


def _prepare_dir() -> tuple[Path, socket.socket]:
    private = Path(tempfile.mkdtemp(prefix="glove-run-"))
    private.chmod(0o700)
    shim = resources.files("glove.mcp").joinpath("shim.py").read_bytes()
    target = private / SHIM_NAME
    target.write_bytes(shim)
    target.chmod(0o555)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(private / SOCKET_NAME))
    (private / SOCKET_NAME).chmod(0o600)
    listener.listen(LISTEN_BACKLOG)
    listener.setblocking(False)
    return private, listener


async def run_mediated(config: McpConfig, build_and_run: SandboxRunner) -> int:
    """Start the mediation, run the sandbox, tear down; return the agent's exit code.

    ``build_and_run(bind_dir, env)`` builds the sandbox spec with the private directory
    bound read-only at :data:`GUEST_DIR` and ``env`` added, runs it, and returns the exit
    code (see :mod:`glove.run.run_cli`).

    Raises:
        GloveError: the mediation could not start (nothing was run).
    """
    private, listener = await asyncio.to_thread(_prepare_dir)
    server: asyncio.AbstractServer | None = None
    mediation = None
    try:
        mediation = await start_mediation(config)

        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            assert mediation is not None
            if mediation.failed.done():
                writer.close()
                return
            mediation.attach(reader, writer)

        server = await asyncio.start_unix_server(on_connect, sock=listener)
        return await build_and_run(str(private), guest_env())
    finally:
        if server is not None:
            server.close()
        else:
            listener.close()
        if mediation is not None:
            await mediation.stop()
        with contextlib.suppress(OSError):
            await asyncio.to_thread(shutil.rmtree, private)
