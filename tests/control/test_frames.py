"""The sans-IO frame codec: whole, byte by byte, capped before allocation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from glove.protocol import (
    FrameDecoder,
    FrameTooLarge,
    MalformedFrame,
    Request,
    TruncatedFrame,
    decode_request,
    encode,
    encode_frame,
)

CAP = 1024


@given(st.lists(st.binary(max_size=CAP), max_size=8), st.integers(1, 7))
def test_frames_round_trip_whole_and_in_pieces(payloads: list[bytes], step: int) -> None:
    """Any split of a stream of frames decodes to the same payloads."""
    stream = b"".join(encode_frame(p, max_frame_bytes=CAP) for p in payloads)
    dec = FrameDecoder(max_frame_bytes=CAP)
    out: list[bytes] = []
    for i in range(0, len(stream), step):
        dec.feed(stream[i : i + step])
        while (frame := dec.next_frame()) is not None:
            out.append(frame)
    dec.close()
    assert out == payloads


def test_oversized_length_is_refused_from_the_header_alone() -> None:
    """A declared length over the cap fails before any payload byte arrives."""
    dec = FrameDecoder(max_frame_bytes=CAP)
    dec.feed((CAP + 1).to_bytes(4, "big"))
    with pytest.raises(FrameTooLarge) as info:
        dec.next_frame()
    assert info.value.declared == CAP + 1


def test_stream_ending_inside_a_frame_is_truncated() -> None:
    """EOF in the middle of a payload is a TruncatedFrame, not a short frame."""
    dec = FrameDecoder(max_frame_bytes=CAP)
    dec.feed(encode_frame(b"hello", max_frame_bytes=CAP)[:-1])
    assert dec.next_frame() is None
    with pytest.raises(TruncatedFrame):
        dec.close()


def test_encoder_refuses_what_a_peer_would_refuse() -> None:
    """We never send a frame over the cap."""
    with pytest.raises(FrameTooLarge):
        encode_frame(b"x" * (CAP + 1), max_frame_bytes=CAP)


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"[]",
        b'{"id": "one", "method": "health"}',
        b'{"id": 1, "method": 2}',
        b'{"id": 1, "method": "health", "surprise": true}',
    ],
)
def test_malformed_requests_raise_a_typed_error(payload: bytes) -> None:
    """Bad JSON, wrong types and unknown fields are MalformedFrame errors."""
    with pytest.raises(MalformedFrame):
        decode_request(payload)


def test_request_round_trip() -> None:
    """A request survives encode and decode."""
    req = Request(id=7, method="diag.tree", params={"stacks": False})
    assert decode_request(encode(req)) == req
