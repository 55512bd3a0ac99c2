"""MCP mediation: upstream servers behind policy and a fail-closed audit log.

``glove mcp serve`` runs :func:`serve` on stdio; ``glove run`` hands the same endpoint to
a sandboxed agent through an inherited descriptor. See ``docs/mcp.md``.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from glove.egress import helper as relay
    from glove.mcp._audit_sink import MediationAudit
    from glove.mcp._channel import (
        CONNECTION_BYTE,
        GUEST_CHANNEL_FD,
        GUEST_DIR,
        SHIM_NAME,
        AgentChannel,
        ConnectionReceiver,
        GuestSetup,
        guest_env,
        prepare_guest_dir,
    )
    from glove.mcp._config import (
        McpConfig,
        UpstreamConfig,
        child_environment,
        load_config,
        parse_config,
    )
    from glove.mcp._framing import LineSplitter, decode_message
    from glove.mcp._http_checks import HttpOptions, is_loopback, parse_listen
    from glove.mcp._http_server import serve_http
    from glove.mcp._inspect import list_tools, upstream_tools
    from glove.mcp._kernel import RUN_ID_BYTES, ExposedTool, Mediator, ToolRegistry, expose_name
    from glove.mcp._prestart import kill_all, prestart
    from glove.mcp._protected import mediator_protected
    from glove.mcp._service import (
        Mediation,
        build_mediation,
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
    "HttpOptions": "glove.mcp._http_checks",
    "is_loopback": "glove.mcp._http_checks",
    "parse_listen": "glove.mcp._http_checks",
    "kill_all": "glove.mcp._prestart",
    "prestart": "glove.mcp._prestart",
    "list_tools": "glove.mcp._inspect",
    "upstream_tools": "glove.mcp._inspect",
    "serve_http": "glove.mcp._http_server",
    "GUEST_CHANNEL_FD": "glove.mcp._channel",
    "GUEST_DIR": "glove.mcp._channel",
    "SHIM_NAME": "glove.mcp._channel",
    "CONNECTION_BYTE": "glove.mcp._channel",
    "GuestSetup": "glove.mcp._channel",
    "guest_env": "glove.mcp._channel",
    "prepare_guest_dir": "glove.mcp._channel",
    "AgentChannel": "glove.mcp._channel",
    "ConnectionReceiver": "glove.mcp._channel",
    "RUN_ID_BYTES": "glove.mcp._kernel",
    "build_mediation": "glove.mcp._service",
    "mediator_protected": "glove.mcp._protected",
    "MediationAudit": "glove.mcp._audit_sink",
    "child_environment": "glove.mcp._config",
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


#: Public modules kept under a former name: ``glove.mcp.relay`` is the in-sandbox helper's
#: MCP-only mode now (one helper for MCP and egress).
_MODULES: dict[str, str] = {"relay": "glove.egress.helper"}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'glove.mcp' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "CONNECTION_BYTE",
    "GUEST_CHANNEL_FD",
    "GUEST_DIR",
    "RUN_ID_BYTES",
    "SHIM_NAME",
    "AgentChannel",
    "CallTool",
    "ConnectionReceiver",
    "ExposedTool",
    "FrameTooLarge",
    "FramingError",
    "GuestSetup",
    "HttpOptions",
    "LineSplitter",
    "ListTools",
    "MalformedMessage",
    "McpConfig",
    "McpConfigError",
    "McpError",
    "Mediation",
    "MediationAudit",
    "Mediator",
    "ToolNameError",
    "ToolRegistry",
    "UpstreamActor",
    "UpstreamCallFailed",
    "UpstreamConfig",
    "UpstreamError",
    "UpstreamProtocolError",
    "UpstreamTransportError",
    "build_mediation",
    "child_environment",
    "decode_message",
    "expose_name",
    "fd_streams",
    "guest_env",
    "is_loopback",
    "kill_all",
    "list_tools",
    "load_config",
    "mediator_protected",
    "parse_config",
    "parse_listen",
    "prepare_guest_dir",
    "prestart",
    "relay",
    "serve",
    "serve_http",
    "socket_streams",
    "start_mediation",
    "stdio_streams",
    "upstream_tools",
]
