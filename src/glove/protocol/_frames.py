"""Length-prefixed frames, sans-IO: bytes in, complete frame payloads out.

A frame is a 4-byte big-endian unsigned length followed by that many payload bytes. The
length is checked against the decoder's cap before any buffer is grown for the payload, so
a peer cannot make us allocate more than ``max_frame_bytes`` plus one read.
"""

from __future__ import annotations

from typing import Final

from glove.protocol.errors import FrameTooLarge, TruncatedFrame

HEADER_BYTES: Final = 4


def encode_frame(payload: bytes, *, max_frame_bytes: int) -> bytes:
    """Return ``payload`` with its length prefix.

    Raises:
        FrameTooLarge: ``payload`` exceeds the cap (we never send what a peer must refuse).
    """
    if len(payload) > max_frame_bytes:
        raise FrameTooLarge(len(payload), max_frame_bytes)
    return len(payload).to_bytes(HEADER_BYTES, "big") + payload


class FrameDecoder:
    """Incremental decoder: ``feed`` bytes, then call ``next_frame`` until it returns None."""

    def __init__(self, *, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._need: int | None = None

    def feed(self, data: bytes) -> None:
        """Append received bytes."""
        self._buf += data

    def next_frame(self) -> bytes | None:
        """Return the next complete payload, or None if more bytes are needed.

        Raises:
            FrameTooLarge: the next frame's declared length exceeds the cap.
        """
        if self._need is None:
            if len(self._buf) < HEADER_BYTES:
                return None
            need = int.from_bytes(self._buf[:HEADER_BYTES], "big")
            if need > self.max_frame_bytes:
                raise FrameTooLarge(need, self.max_frame_bytes)
            del self._buf[:HEADER_BYTES]
            self._need = need
        if len(self._buf) < self._need:
            return None
        payload = bytes(self._buf[: self._need])
        del self._buf[: self._need]
        self._need = None
        return payload

    @property
    def pending(self) -> bool:
        """True when part of a frame has been received."""
        return bool(self._buf) or self._need is not None

    @property
    def wanted(self) -> int:
        """How many more bytes complete the current header or frame."""
        if self._need is None:
            return HEADER_BYTES - len(self._buf)
        return self._need - len(self._buf)

    def close(self) -> None:
        """Declare end of stream.

        Raises:
            TruncatedFrame: the stream ended inside a header or a payload.
        """
        if self._buf or self._need is not None:
            raise TruncatedFrame(
                f"stream ended inside a frame ({len(self._buf)} of "
                f"{HEADER_BYTES if self._need is None else self._need} bytes)"
            )
