"""Errors of the wire protocols (sans-IO framing and message decoding).

::

    GloveError
    ├── ProtocolError          the peer sent something we will not accept; the connection ends
    │   ├── FrameTooLarge      declared length over the named cap (checked before allocating)
    │   ├── TruncatedFrame     the stream ended inside a frame (or it did not complete in time)
    │   └── MalformedFrame     the payload is not a valid message (names the bad field)
    │       └── DuplicateKey   the payload's JSON repeats a key in one object
    └── RequestError           one request is refused; the connection stays open
        └── InvalidParams      a method's params do not decode to its type (names the path)

Every class carries ``code``: the stable machine code the control protocol sends for it
(``glove.protocol.control.ERROR_CODES`` is the table).
"""

from __future__ import annotations

from glove.errors import GloveError


class ProtocolError(GloveError):
    """The peer broke the protocol; the connection it came on is closed."""

    code = "protocol_error"


class FrameTooLarge(ProtocolError):
    """A frame declared a length above the cap."""

    code = "frame_too_large"

    def __init__(self, declared: int, cap: int) -> None:
        super().__init__(f"frame of {declared} bytes exceeds the {cap}-byte cap")
        self.declared = declared
        self.cap = cap


class TruncatedFrame(ProtocolError):
    """The stream ended before a frame was complete."""

    code = "truncated_frame"


class MalformedFrame(ProtocolError):
    """A complete frame whose payload does not decode to a valid message."""

    code = "malformed_frame"


class DuplicateKey(MalformedFrame):
    """A frame's JSON names one key twice in an object (also after unescaping)."""

    code = "duplicate_key"


class RequestError(GloveError):
    """A request was refused; the connection it came on stays open."""

    code = "request_error"


class InvalidParams(RequestError):
    """A request's ``params`` do not match its method's type; ``path`` names the bad field."""

    code = "invalid_params"

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path
