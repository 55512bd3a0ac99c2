"""JSON-RPC 2.0 message types as MCP uses them on stdio (no batches).

Decoded messages are frozen msgspec Structs. A response's ``result`` stays a
:class:`msgspec.Raw` so the mediator forwards a tool's result byte for byte without
decoding it; only the parts Glove must read (``tools/list`` pages, handshake results)
are decoded, and then into the typed results below.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

JSONRPC_VERSION = "2.0"

#: A JSON object at MCP's JSON-RPC boundary: what passes through Glove as the peers wrote it
#: (params and results of tools, prompts, resources, completions and logging; an upstream's
#: own capabilities, server info and definitions; the agent's declared capabilities). Its
#: members are whatever the peer's schemas say, so Glove reads only the few it checks.
#: Glove's own shapes (what it advertises, its records and reports) are typed instead.
McpObject: TypeAlias = dict[str, Any]

RequestId = int | str


class Request(msgspec.Struct, frozen=True):
    """A request: it has an id and expects exactly one response with that id."""

    id: RequestId
    method: str
    params: McpObject | None = None


class Notification(msgspec.Struct, frozen=True):
    """A notification: no id, never answered."""

    method: str
    params: McpObject | None = None


class Response(msgspec.Struct, frozen=True):
    """A successful response; ``result`` is the undecoded JSON of the result object."""

    id: RequestId
    result: msgspec.Raw


class ErrorObject(msgspec.Struct, frozen=True):
    """The ``error`` member of an error response."""

    code: int
    message: str
    data: Any = None


class ErrorResponse(msgspec.Struct, frozen=True):
    """An error response; ``id`` is ``None`` when the request's id could not be read."""

    id: RequestId | None
    error: ErrorObject


Message = Request | Notification | Response | ErrorResponse


class ToolInfo(msgspec.Struct, frozen=True):
    """The parts of an upstream tool definition Glove reads; ``raw`` is the whole object."""

    name: str
    description: str | None
    input_schema: McpObject
    raw: McpObject


class ListToolsPage(msgspec.Struct, frozen=True, rename="camel"):
    """One page of a ``tools/list`` result."""

    tools: list[McpObject]
    next_cursor: str | None = None


class InitializeResult(msgspec.Struct, frozen=True, rename="camel"):
    """The parts of an ``initialize`` result Glove reads from an upstream."""

    protocol_version: str
    capabilities: McpObject = msgspec.field(default_factory=dict)
    server_info: McpObject = msgspec.field(default_factory=dict)


class DiscoverResult(msgspec.Struct, frozen=True, rename="camel"):
    """The parts of a 2026-07-28 ``server/discover`` result Glove reads."""

    supported_versions: list[str]
    capabilities: McpObject = msgspec.field(default_factory=dict)
