"""Terminal escape sequences: neutralize the dangerous ones, track the modes (pure).

An agent's transcript is bytes for *its* terminal. Printed on the operator's terminal as
they are, some sequences act on that terminal rather than show text: OSC 52 writes the
operator's clipboard, OSC 0/2 set the window title, DCS and the other string sequences
(SOS, PM, APC) reach terminal-specific parsers, and queries such as DSR (``CSI 6 n``), DA
(``CSI c``) or window reports (``CSI 21 t``) make the terminal *type* an answer into the
operator's input. :class:`EscapeFilter` (``glove session log`` without ``--raw``) lets
through only an allowlist that draws text, SGR colours and attributes and plain cursor
motion and erasure, drops the mode toggles every prompt and editor emits and that mean
nothing in a log (bracketed paste, cursor visibility and blink, application cursor keys and
keypad, focus events: :data:`QUIET_MODES`), and renders every other control visibly and
inertly in ``cat -v`` notation (ESC as ``^[``, DEL as ``^?``, a C1 control U+009B as
``M-^[``). It is a streaming state machine whose only buffer is one pending CSI of at most
:data:`MAX_CSI_CHARS` characters, so a flood or an unterminated sequence costs no memory,
and its output does not depend on how the input was cut into chunks.

:class:`ModeTracker` follows the DEC private modes an agent sets (alternate screen, cursor
visibility, mouse reporting, bracketed paste, application keys) so a client that attaches
later can put its terminal in the same state, and a client that detaches can undo exactly
what the agent left set.
"""

from __future__ import annotations

import codecs
import re
from typing import Final

import msgspec

#: The longest CSI (parameters and intermediates) let through; longer ones are shown inert.
MAX_CSI_CHARS: Final = 64
#: The largest numeric parameter let through (a huge repeat count is a terminal DoS).
MAX_CSI_NUMBER: Final = 9999
#: CSI finals let through: SGR, cursor motion, erase, insert/delete, scroll.
ALLOWED_CSI_FINALS: Final = frozenset("mABCDEFGHJKSTfdLMPX@")
#: DEC private modes whose set/reset (``CSI ? N h``/``l``) a log view drops: application
#: cursor keys, cursor blink and visibility, focus events, bracketed paste. Nothing reaches
#: the terminal, so dropping is as safe as showing them inert, and a shell's prompt is not
#: wrapped in ``^[[?2004h`` noise. The alternate screen and mouse reporting stay shown.
QUIET_MODES: Final = frozenset({1, 12, 25, 1004, 2004})
#: ``ESC =`` / ``ESC >`` (keypad application/numeric mode): dropped the same way.
_QUIET_ESCAPES: Final = frozenset("=>")
_QUIET_MODE: Final = re.compile(r"\?([0-9]{1,4}(?:;[0-9]{1,4})*)")
_ALLOWED_CONTROLS: Final = frozenset("\t\n\r\b")
_INTERESTING: Final = re.compile(r"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_PARAMS: Final = re.compile(r"[0-9;:]*")
_ESC: Final = "\x1b"

_GROUND, _ESCAPE, _CSI = 0, 1, 2


def caret(char: str) -> str:
    """A control character in ``cat -v`` notation (inert on any terminal)."""
    code = ord(char)
    if code == 0x7F:
        return "^?"
    if code >= 0x80:
        return "M-" + caret(chr(code - 0x80))
    return "^" + chr(code + 0x40)


def _allowed_csi(body: str, final: str) -> bool:
    if final not in ALLOWED_CSI_FINALS or _PARAMS.fullmatch(body) is None:
        return False
    numbers = [int(n) for n in re.split("[;:]", body) if n]
    if any(n > MAX_CSI_NUMBER for n in numbers):
        return False
    return not (final == "J" and 3 in numbers)  # erasing the operator's scrollback


def _quiet_mode(body: str, final: str) -> bool:
    match = _QUIET_MODE.fullmatch(body) if final in "hl" else None
    return match is not None and all(int(n) in QUIET_MODES for n in match.group(1).split(";"))


class EscapeFilter:
    """Neutralizes terminal-acting sequences in text, chunk by chunk (see the module)."""

    def __init__(self) -> None:
        self._state = _GROUND
        self._pending: list[str] = []

    def feed(self, text: str) -> str:
        """The safe rendering of the next ``text``."""
        out: list[str] = []
        i = 0
        n = len(text)
        while i < n:
            if self._state == _GROUND:
                match = _INTERESTING.search(text, i)
                if match is None:
                    out.append(text[i:])
                    break
                out.append(text[i : match.start()])
                char = match.group()
                i = match.end()
                if char == _ESC:
                    self._state = _ESCAPE
                else:
                    out.append(caret(char))
            elif self._state == _ESCAPE:
                if text[i] == "[":
                    self._state = _CSI
                    self._pending = []
                    i += 1
                elif text[i] in _QUIET_ESCAPES:
                    self._state = _GROUND
                    i += 1
                else:
                    out.append("^[")  # the rest is shown as text: inert without its ESC
                    self._state = _GROUND
            else:
                i = self._csi(text, i, out)
        return "".join(out)

    def _csi(self, text: str, i: int, out: list[str]) -> int:
        char = text[i]
        code = ord(char)
        if 0x40 <= code <= 0x7E:  # the final byte
            body = "".join(self._pending)
            if _allowed_csi(body, char):
                out.append(f"\x1b[{body}{char}")
            elif _quiet_mode(body, char):
                pass
            else:
                out.append(f"^[[{body}{char}")
            self._pending = []
            self._state = _GROUND
            return i + 1
        if 0x20 <= code <= 0x3F and len(self._pending) < MAX_CSI_CHARS:
            self._pending.append(char)
            return i + 1
        # Not part of a CSI (a control, text, too long): show what we held, go on from here.
        out.append("^[[" + "".join(self._pending))
        self._pending = []
        self._state = _GROUND
        return i

    def close(self) -> str:
        """What is still held, rendered inert (the input ended inside a sequence)."""
        held = ""
        if self._state == _ESCAPE:
            held = "^["
        elif self._state == _CSI:
            held = "^[[" + "".join(self._pending)
        self._state = _GROUND
        self._pending = []
        return held


class LogFilter:
    """Transcript bytes to safe text: UTF-8 (invalid bytes as U+FFFD), then
    :class:`EscapeFilter`."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._filter = EscapeFilter()

    def feed(self, data: bytes) -> str:
        """The safe text of the next bytes."""
        return self._filter.feed(self._decoder.decode(data))

    def close(self) -> str:
        """The safe text of whatever is still held."""
        return self._filter.feed(self._decoder.decode(b"", final=True)) + self._filter.close()


# -- modes ----------------------------------------------------------------------------------

#: DEC private modes followed, off by default: application cursor keys, the alternate
#: screens, mouse reporting and its encodings, focus events, bracketed paste.
TRACKED_OFF_BY_DEFAULT: Final = frozenset(
    {1, 47, 1047, 1049, 1000, 1002, 1003, 1005, 1006, 1015, 1004, 2004}
)
#: ... and on by default: the visible cursor.
TRACKED_ON_BY_DEFAULT: Final = frozenset({25})
_ALT_SCREENS: Final = (1049, 1047, 47)
_MODE_SEQUENCE: Final = re.compile(rb"\x1b(?:\[\?([0-9;]{1,64})([hl])|([=>c]))")
#: Bytes kept from the end of a chunk that may hold the start of a mode sequence.
_CARRY_BYTES: Final = 72


class TerminalModes(msgspec.Struct, frozen=True, omit_defaults=True):
    """The modes an agent left away from their defaults.

    Attributes:
        on: tracked private modes it set (default off), sorted.
        off: tracked private modes it reset (default on: 25, the cursor), sorted.
        keypad: the application keypad (``ESC =``) is on.
    """

    on: tuple[int, ...] = ()
    off: tuple[int, ...] = ()
    keypad: bool = False

    def restore(self) -> bytes:
        """What puts a fresh terminal in these modes (sent before a replay)."""
        alt = [m for m in _ALT_SCREENS if m in self.on][:1]
        rest = [m for m in self.on if m not in _ALT_SCREENS]
        out = b"".join(b"\x1b[?%dh" % m for m in [*alt, *rest])
        out += b"".join(b"\x1b[?%dl" % m for m in self.off)
        return out + (b"\x1b=" if self.keypad else b"")

    def reset(self) -> bytes:
        """What undoes them, and resets attributes and the cursor (sent at detach)."""
        out = b"\x1b[0m"
        out += b"".join(b"\x1b[?%dl" % m for m in self.on if m not in _ALT_SCREENS)
        if any(m in self.on for m in _ALT_SCREENS):
            out += b"\x1b[?1049l"
        out += b"\x1b[?25h" + (b"\x1b>" if self.keypad else b"")
        return out


class ModeTracker:
    """Follows mode changes in raw transcript bytes, chunk by chunk (a regex scan)."""

    def __init__(self, modes: TerminalModes | None = None) -> None:
        start = modes or TerminalModes()
        self._on = set(start.on)
        self._off = set(start.off)
        self._keypad = start.keypad
        self._carry = b""

    @property
    def modes(self) -> TerminalModes:
        """The modes now."""
        return TerminalModes(tuple(sorted(self._on)), tuple(sorted(self._off)), self._keypad)

    def feed(self, data: bytes) -> None:
        """Follow the next bytes."""
        if not self._carry and b"\x1b" not in data:
            return
        buf = self._carry + data
        last = 0
        for match in _MODE_SEQUENCE.finditer(buf):
            self._apply(match)
            last = match.end()
        at = buf.rfind(b"\x1b", max(last, len(buf) - _CARRY_BYTES))
        self._carry = buf[at:] if at >= 0 else b""

    def _apply(self, match: re.Match[bytes]) -> None:
        single = match.group(3)
        if single == b"=":
            self._keypad = True
        elif single == b">":
            self._keypad = False
        elif single == b"c":  # RIS: a full reset
            self._on.clear()
            self._off.clear()
            self._keypad = False
        else:
            setting = match.group(2) == b"h"
            for part in match.group(1).split(b";"):
                if not part:
                    continue
                mode = int(part)
                if mode in TRACKED_OFF_BY_DEFAULT:
                    (self._on.add if setting else self._on.discard)(mode)
                elif mode in TRACKED_ON_BY_DEFAULT:
                    (self._off.discard if setting else self._off.add)(mode)
