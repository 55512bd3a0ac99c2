"""MCP mediation: upstream servers behind policy and a fail-closed audit log.

``glove mcp serve`` runs :func:`serve` on stdio; ``glove run`` hands the same endpoint to
a sandboxed agent through an inherited descriptor. See ``docs/mcp.md``.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Imported on first use (PEP 562): `glove mcp serve` starts its upstreams before the rest
# of the package is loaded (see glove.mcp._prestart), so importing glove.cli._mcp must not
# drag the whole package in.
_LAZY: dict[str, str] = {
    "CallTool": "glove.mcp._upstream",
    "ExposedTool": "glove.mcp._kernel",
    "FrameTooLarge": "glove.mcp.errors",
    "FramingError": "glove.mcp.errors",
    "LineSplitter": "glove.mcp._framing",
    "ListTools": "glove.mcp._upstream",
    "MalformedMessage": "glove.mcp.errors",
    "McpConfig": "glove.mcp._config",
    "McpConfigError": "glove.mcp.errors",
    "McpError": "glove.mcp.errors",
    "Mediation": "glove.mcp._service",
    "Mediator": "glove.mcp._kernel",
    "ToolNameError": "glove.mcp.errors",
    "ToolRegistry": "glove.mcp._kernel",
    "UpstreamActor": "glove.mcp._upstream",
    "UpstreamCallFailed": "glove.mcp.errors",
    "UpstreamConfig": "glove.mcp._config",
    "UpstreamError": "glove.mcp.errors",
    "UpstreamProtocolError": "glove.mcp.errors",
    "UpstreamTransportError": "glove.mcp.errors",
    "decode_message": "glove.mcp._framing",
    "expose_name": "glove.mcp._kernel",
    "fd_streams": "glove.mcp._service",
    "load_config": "glove.mcp._config",
    "parse_config": "glove.mcp._config",
    "serve": "glove.mcp._service",
    "socket_streams": "glove.mcp._service",
    "start_mediation": "glove.mcp._service",
    "stdio_streams": "glove.mcp._service",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'glove.mcp' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


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
