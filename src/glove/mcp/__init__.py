"""MCP mediation: upstream servers behind policy and a fail-closed audit log.

``glove mcp serve`` runs :func:`serve` on stdio; ``glove run`` hands the same endpoint to
a sandboxed agent through an inherited descriptor. See ``docs/mcp.md``.
"""

from glove.mcp._config import McpConfig, UpstreamConfig, load_config, parse_config
from glove.mcp._framing import LineSplitter, decode_message
from glove.mcp._kernel import ExposedTool, Mediator, ToolRegistry, expose_name
from glove.mcp._service import (
    Mediation,
    fd_streams,
    serve,
    socket_streams,
    start_mediation,
    stdio_streams,
)
from glove.mcp._upstream import CallTool, ListTools, UpstreamActor
from glove.mcp.errors import (
    FrameTooLarge,
    FramingError,
    MalformedMessage,
    McpConfigError,
    McpError,
    ToolNameError,
    UpstreamCallFailed,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamTransportError,
)

__all__ = [
    "CallTool",
    "ExposedTool",
    "FrameTooLarge",
    "FramingError",
    "LineSplitter",
    "ListTools",
    "MalformedMessage",
    "McpConfig",
    "McpConfigError",
    "McpError",
    "Mediation",
    "Mediator",
    "ToolNameError",
    "ToolRegistry",
    "UpstreamActor",
    "UpstreamCallFailed",
    "UpstreamConfig",
    "UpstreamError",
    "UpstreamProtocolError",
    "UpstreamTransportError",
    "decode_message",
    "expose_name",
    "fd_streams",
    "load_config",
    "parse_config",
    "serve",
    "socket_streams",
    "start_mediation",
    "stdio_streams",
]
