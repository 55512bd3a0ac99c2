"""Naive, byte-at-a-time reference implementations the evaluator is compared against.

They are written for clarity, not speed: a per-byte state machine for the normalizer, a
whole-stream ``bytes.find`` for literals, a one-shot ``bytes.decode`` for UTF-8. A
property test feeds the same stream to these and to the streaming core.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

GROUND, ESC, ESC_I, CSI, STR = range(5)
_STR_FINALS = frozenset(b"]PX^_")


def _units(data: bytes) -> list[tuple[bool, int]]:
    """The stream as units: (True, code) for a UTF-8 C1 control (C2 80..C2 9F), else
    (False, byte)."""
    units: list[tuple[bool, int]] = []
    i = 0
    while i < len(data):
        if data[i] == 0xC2 and i + 1 < len(data) and 0x80 <= data[i + 1] <= 0x9F:
            units.append((True, data[i + 1]))
            i += 2
        else:
            units.append((False, data[i]))
            i += 1
    return units


def reference_normalize(data: bytes) -> bytes:
    """glove-text-v1, one byte (or one C1 control) at a time."""
    out = bytearray()
    state = GROUND
    for is_c1, code in _units(data):
        if is_c1:
            if code == 0x9B:
                state = CSI
            elif code in (0x90, 0x98, 0x9D, 0x9E, 0x9F):
                state = STR
            else:
                state = GROUND
            continue
        if code == 0x1B:
            state = ESC
            continue
        if code in (0x18, 0x1A):
            state = GROUND
            continue
        if state == GROUND:
            if code in (0x09, 0x0A) or (0x20 <= code != 0x7F):
                out.append(code)
        elif state in (ESC, ESC_I):
            if state == ESC and code == ord("["):
                state = CSI
            elif state == ESC and code in _STR_FINALS:
                state = STR
            elif 0x30 <= code <= 0x7E:
                state = GROUND
            elif code >= 0x80:
                state = GROUND
                out.append(code)
            else:
                state = ESC_I
        elif state == CSI:
            if 0x40 <= code <= 0x7E:
                state = GROUND
            elif code >= 0x80:
                state = GROUND
                out.append(code)
        elif state == STR and code == 0x07:
            state = GROUND
    return bytes(out)


def reference_first_offsets(haystack: bytes, literals: Sequence[bytes]) -> list[int | None]:
    """The first offset of each literal in the whole stream, or None."""
    offsets: list[int | None] = []
    for literal in literals:
        at = haystack.find(literal)
        offsets.append(None if at < 0 else at)
    return offsets


def reference_utf8(data: bytes) -> tuple[str, int | None]:
    """("valid", None), ("invalid", first bad byte) or ("truncated", start of the cut
    sequence) for the whole stream."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data":
            return "truncated", exc.start
        return "invalid", exc.start
    return "valid", None


def reference_sha256(data: bytes) -> str:
    """The digest string of the whole stream."""
    return "sha256:" + hashlib.sha256(data).hexdigest()
