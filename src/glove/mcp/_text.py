"""Text a peer sent, made safe to show on a terminal and to write in one JSON line (pure)."""

from __future__ import annotations

from typing import Final

#: Longest text kept by default, in characters (a hostile peer cannot bloat a message).
MAX_RECORD_TEXT_CHARS: Final = 512


def printable(text: str, limit: int = MAX_RECORD_TEXT_CHARS) -> str:
    """``text`` with every character that is not printable (controls, escape sequences'
    ESC, bidirectional overrides, line breaks) written as a ``\\uXXXX`` escape and cut to
    ``limit`` characters, so it cannot drive a terminal or pass for another line."""
    if text.isprintable() and len(text) <= limit:
        return text
    out: list[str] = []
    size = 0
    for char in text:
        if char.isprintable():
            piece = char
        elif ord(char) > 0xFFFF:
            piece = f"\\U{ord(char):08x}"
        else:
            piece = f"\\u{ord(char):04x}"
        if size + len(piece) > limit:
            out.append("...")
            break
        out.append(piece)
        size += len(piece)
    return "".join(out)
