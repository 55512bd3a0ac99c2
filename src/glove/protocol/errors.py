"""Errors of the wire protocols (sans-IO framing and message decoding).

::

    GloveError
    └── ProtocolError          the peer sent something we will not accept; the connection ends
        ├── FrameTooLarge      declared length over the named cap (checked before allocating)
        ├── TruncatedFrame     the stream ended inside a frame
        └── MalformedFrame     the payload is not a valid message (names the bad field)
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
