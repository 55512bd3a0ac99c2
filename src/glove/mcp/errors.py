"""Errors of MCP mediation.

Every error carries who caused it: the agent (malformed input), an upstream server
(transport, protocol), the configuration, or Glove's own audit trail::

    GloveError
    └── McpError
        ├── FramingError             a frame broke the newline-delimited JSON-RPC rules
        │   ├── FrameTooLarge        a line exceeded its bound (code -32600)
        │   └── MalformedMessage     not JSON (-32700) or not a JSON-RPC 2.0 message (-32600)
        ├── HttpError                an HTTP message broke the rules (``status`` to answer)
        ├── McpConfigError           the mediator configuration file is invalid
        ├── MediationFailed          the mediation session ended under a running agent
        ├── ToolNameError            a tool name cannot be exposed, or two exposed names collide
        ├── UpstreamError            an upstream server failed the call
        │   ├── UpstreamTransportError   it died, hung, closed its pipe or wrote garbage
        │   ├── UpstreamCallFailed       it answered the request with a JSON-RPC error
        │   └── UpstreamProtocolError    it answered with something the protocol forbids

A call past its deadline surfaces as :class:`glove.actors.DeadlineExceeded` (a
``TimeoutError``); an audit failure as the :mod:`glove.audit` error that caused it. The
agent sees each as a JSON-RPC error with one of the codes below.
"""

from __future__ import annotations

from glove.errors import GloveError
from glove.mcp._text import printable

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Codes Glove allocates itself sit outside the JSON-RPC reserved range (-32768..-32000),
# as the 2026-07-28 error-code policy asks, so a client cannot mistake them for a peer's.
POLICY_DENIED = -33001
UPSTREAM_FAILED = -33002
UPSTREAM_TIMEOUT = -33003
AUDIT_FAILED = -33004
OVERLOADED = -33005
#: Longest message of an upstream error, in characters (its stderr lines come on top).
MAX_MESSAGE_CHARS = 1024


class McpError(GloveError):
    """Base class of MCP mediation errors."""


class FramingError(McpError):
    """A frame broke the newline-delimited JSON-RPC rules.

    ``code`` is the JSON-RPC error code to answer with; ``request_id`` is the id of the
    offending request when it could be read, else ``None``.
    """

    code = INVALID_REQUEST

    def __init__(self, message: str, *, request_id: int | str | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class FrameTooLarge(FramingError):
    """A line exceeded the frame bound before its newline arrived."""


class MalformedMessage(FramingError):
    """A frame was not JSON or not a JSON-RPC 2.0 message (batches included)."""

    def __init__(
        self, message: str, *, code: int = INVALID_REQUEST, request_id: int | str | None = None
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.code = code


class HttpError(McpError):
    """An HTTP message (a request head, a body, an event stream) broke the rules.

    ``status`` is the HTTP status to answer with (4xx: the client's fault; 502: an
    upstream's).
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class McpConfigError(McpError):
    """The mediator configuration is invalid; the message names the file and the key."""


class MediationFailed(McpError):
    """The mediation session failed while the agent ran; the agent was stopped (one strike)."""


class ToolNameError(McpError):
    """A tool cannot be exposed under a valid name, or two exposed names collide."""


class UpstreamError(McpError):
    """An upstream server failed a call; ``upstream`` is its configured id.

    ``summary`` is the error without the upstream's own words; ``stderr`` holds the last
    lines the server wrote on its stderr (neutralised, bounded), when it wrote any. ``str()``
    (what the operator reads) shows both; an agent is told only the summary
    (:func:`agent_message`): a server's stderr may name host paths or secrets.
    """

    def __init__(self, upstream: str, message: str, *, stderr: tuple[str, ...] = ()) -> None:
        self.upstream = upstream
        # The message may quote the server (a key of its JSON, its error text): neutralised,
        # so it cannot drive the operator's terminal.
        self.summary = f"upstream {upstream!r}: {printable(message, MAX_MESSAGE_CHARS)}"
        self.stderr = stderr
        super().__init__(self._text())

    def _text(self) -> str:
        if not self.stderr:
            return self.summary
        shown = "\n".join(f"  | {line}" for line in self.stderr)
        return f"{self.summary}; the last lines of its stderr:\n{shown}"

    def add_stderr(self, lines: tuple[str, ...]) -> None:
        """Attach the server's last stderr lines, unless some are attached already."""
        if lines and not self.stderr:
            self.stderr = lines
            self.args = (self._text(),)


class UpstreamTransportError(UpstreamError):
    """The upstream died, closed its pipe, wrote garbage or an oversized frame."""


class UpstreamCallFailed(UpstreamError):
    """The upstream answered the request with a JSON-RPC error (passed on to the agent)."""

    def __init__(self, upstream: str, code: int, message: str) -> None:
        super().__init__(upstream, f"error {code}: {message}")
        self.code = code
        self.remote_message = message


class UpstreamProtocolError(UpstreamError):
    """The upstream answered with something the protocol forbids (bad handshake, bad result)."""


def agent_message(exc: BaseException) -> str:
    """What an agent may be told of ``exc``: an upstream's error without its stderr lines
    (those are the operator's: they go to Glove's stderr and the audit log only)."""
    return exc.summary if isinstance(exc, UpstreamError) else str(exc)
