"""Terminal escape sequences: neutralize the dangerous ones, track the modes (pure).

An agent's output is bytes for *its* terminal. Printed on the operator's terminal as they
are, some sequences act on that terminal rather than show text: OSC 52 writes the
operator's clipboard, OSC 0/2 set the window title, DCS and the other string sequences
(SOS, PM, APC) reach terminal-specific parsers, and queries such as DSR (``CSI 6 n``), DA
(``CSI c``), DECRQSS (``DCS $ q``) or window reports (``CSI 21 t``) make the terminal
*type* an answer into the operator's input. :class:`EscapeFilter` has two modes:

``text`` (``glove session log``; ``glove exec`` and ``glove run`` writing to a terminal)
    lets through only an allowlist that draws text, SGR colours and attributes and plain
    cursor motion and erasure, drops the mode toggles every prompt and editor emits and
    that mean nothing there (bracketed paste, cursor visibility and blink, application
    cursor keys and keypad, focus events: :data:`QUIET_MODES`), and renders every other
    control visibly and inertly in ``cat -v`` notation (ESC as ``^[``, DEL as ``^?``, a C1
    control U+009B as ``M-^[``).
``pty`` (``glove exec --pty`` and ``glove run --pty`` writing to a terminal)
    keeps what an agent's TUI needs (private modes, the alternate screen, mouse and paste
    modes, cursor styles, charsets, titles, hyperlinks, colour settings) byte for byte and
    *removes* the dangerous subset, counting each: every sequence that makes a terminal
    answer (:func:`pty_csi_allowed` has the CSI list, ``ESC Z``, ENQ), every DCS, SOS, PM
    and APC string (DECRQSS, XTGETTCAP, tmux passthrough, graphics), every OSC but
    :data:`PTY_OSC_ALLOWED` (so OSC 52 clipboard access, OSC 50 fonts, OSC 1337 and 5113
    file transfers go) and the queries among those (a ``?`` in a colour OSC), and every
    C1 control (a terminal that honours 8-bit controls would start sequences the filter
    did not parse). A sequence is written only whole, so the terminal never sees half of
    one: what the filter drops can never join what follows.

It is a streaming state machine whose only buffer is one pending CSI of at most
:data:`MAX_CSI_CHARS` characters, or under ``pty`` one pending OSC of at most
:data:`MAX_STRING_CHARS` (longer ones are dropped, their rest skipped without being held),
so a flood or an unterminated sequence costs no memory, and its output does not depend on
how the input was cut into chunks. :class:`TerminalFilter` runs it on bytes (``pty``
keeps bytes that are not UTF-8 exactly as they came).

:class:`ModeTracker` follows the DEC private modes an agent sets (alternate screen, cursor
visibility, mouse reporting, bracketed paste, application keys) so a client that attaches
later can put its terminal in the same state, and a client that detaches can undo exactly
what the agent left set.
"""

from __future__ import annotations

import codecs
import re
from typing import Final, Literal

import msgspec

FilterMode = Literal["text", "pty"]
"""``text``: only drawing sequences pass, the rest shown inert; ``pty``: only the
dangerous subset is removed (see the module docstring)."""

#: The longest CSI (parameters and intermediates) let through; longer ones are shown inert
#: (``text``) or dropped (``pty``).
MAX_CSI_CHARS: Final = 64
#: The largest numeric parameter let through in ``text`` mode (a huge repeat count is a
#: terminal DoS).
MAX_CSI_NUMBER: Final = 9999
#: CSI finals let through in ``text`` mode: SGR, cursor motion, erase, insert/delete, scroll.
ALLOWED_CSI_FINALS: Final = frozenset("mABCDEFGHJKSTfdLMPX@")
#: DEC private modes whose set/reset (``CSI ? N h``/``l``) ``text`` mode drops: application
#: cursor keys, cursor blink and visibility, focus events, bracketed paste. Nothing reaches
#: the terminal, so dropping is as safe as showing them inert, and a shell's prompt is not
#: wrapped in ``^[[?2004h`` noise. The alternate screen and mouse reporting stay shown.
QUIET_MODES: Final = frozenset({1, 12, 25, 1004, 2004})
#: ``ESC =`` / ``ESC >`` (keypad application/numeric mode): dropped the same way.
_QUIET_ESCAPES: Final = frozenset("=>")
_QUIET_MODE: Final = re.compile(r"\?([0-9]{1,4}(?:;[0-9]{1,4})*)")
#: The longest OSC payload let through in ``pty`` mode (a hyperlink, a title).
MAX_STRING_CHARS: Final = 4096
#: Intermediates of an ``ESC I.. F`` sequence (``ESC ( 0``) let through in ``pty`` mode.
MAX_ESC_INTERMEDIATES: Final = 4
#: OSC numbers let through in ``pty`` mode: titles (0-2), the palette and the special and
#: dynamic colours when set (4, 10-19, 104, 110-119; a ``?`` makes one a query: dropped),
#: the working directory (7), hyperlinks (8), notifications and progress (9), prompt marks
#: (133). Everything else (52 clipboard, 50 font, 1337, 5113 and 5522 file and clipboard
#: protocols, 46 log file, ...) is dropped.
PTY_OSC_ALLOWED: Final = frozenset(
    {0, 1, 2, 4, 7, 8, 9, 104, 133, *range(10, 20), *range(110, 120)}
)
_COLOUR_OSC: Final = frozenset({4, 104, *range(10, 20), *range(110, 120)})
_ALLOWED_CONTROLS: Final = frozenset("\t\n\r\b")
_INTERESTING: Final = re.compile(r"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]")
#: ``pty`` mode, ground state: ENQ (answerback), ESC, C1 controls as characters, and raw
#: C1 bytes (as ``surrogateescape`` decodes them).
_PTY_INTERESTING: Final = re.compile("[\x05\x1b\x80-\x9f\udc80-\udc9f]")
#: Inside a string sequence: any control ends the plain run of payload.
_STRING_STOP: Final = re.compile("[\x00-\x1f\x7f-\x9f\udc80-\udc9f]")
_PARAMS: Final = re.compile(r"[0-9;:]*")
_CSI_SHAPE: Final = re.compile(r"([<=>?]?)([0-9;:]*)([ -/]*)")
#: A whole CSI at a position (parameters, then intermediates, then the final): the fast
#: path; anything else (cut by a read, unusual order) goes through the state machine,
#: which decides the same.
_CSI_AT: Final = re.compile(r"\x1b\[([0-?]{0,64})([ -/]{0,64})([@-~])")
#: A whole OSC at a position, its payload free of controls (the ``pty`` fast path).
_OSC_AT: Final = re.compile("\x1b\\]([^\x00-\x1f\x7f-\x9f\udc80-\udc9f]{0,4096})(\x07|\x1b\\\\)")
#: Fast paths: a run of text and of the commonest sequences each mode lets through as they
#: are, matched in one step. Each is a subset of what the rules above allow (the tests feed
#: every input whole and one character at a time, where only the state machine runs, and
#: compare); whatever the run does not take goes through the state machine.
_TEXT_RUN: Final = re.compile(
    "(?:[^\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]+"
    r"|\x1b\[(?=[0-9;:]{0,64}[mA-HKSTfdLMPX@])(?:[0-9]{1,4}(?![0-9])|[;:])*[mA-HKSTfdLMPX@]"
    r"|\x1b\[[0-2]?J"
    ")+"
)
_PTY_RUN: Final = re.compile(
    "(?:[^\x05\x1b\x80-\x9f\udc80-\udc9f]+"
    r"|\x1b\[[0-9;:]{0,64}[@A-Z`abd-hj-mo-suvz{|}~]"  # all finals but c i n t w x y
    r"|\x1b\[\?[0-9;:]{0,63}[hlrsJK]"
    r"|\x1b\[[<=>][0-9;:]{0,63}[mu]"
    r"|\x1b[78=>M]|\x1b[()][0AB]"
    ")+"
)
_OSC_NUMBER: Final = re.compile(r"[0-9]{1,5}")
_ESC: Final = "\x1b"
_BEL: Final = "\x07"
_C1_ST: Final = frozenset("\x9c\udc9c")
_CANCEL: Final = frozenset("\x18\x1a")  # CAN and SUB end any sequence
#: ``ESC x`` that opens a string sequence: OSC, then DCS, SOS, PM and APC.
_STRING_OPENERS: Final = frozenset("]PX^_")

_GROUND, _ESCAPE, _CSI, _ESC_INTER, _STRING, _STRING_ESC = range(6)


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


def pty_csi_allowed(body: str, final: str) -> bool:  # noqa: PLR0911 - one rule per family
    """Whether ``pty`` mode lets ``CSI body final`` through: every CSI but those that make
    the terminal answer or act outside the screen.

    Dropped: DA1-3 (``c``), DSR and CPR (``n``), XTVERSION (``> q``), DECRQM (``$ p``),
    DECSR (``+ p``), window operations and reports (``t`` but 22/23, the title stack),
    DECRQCRA and DECTST (``y``), DECRQPSR and kin (``w``), DECRQTSR, DECRQUPSS and the
    kitty keyboard query (``$ u``, ``& u``, ``? u``), DECREQTPARM (``x``), XTQMODKEYS
    (``? m``), XTSMGRAPHICS (``? S``), XTREPORTCOLORS (``# R``), XTREPORTSGR and DECRQLP
    (``# |``, ``' |``), DECRQDE and DECRQPKU (``" v``, ``, v``), media copy (``i``: a
    terminal may run its print command), and any CSI of an unusual shape.
    """
    shape = _CSI_SHAPE.fullmatch(body)
    if shape is None:
        return False
    prefix, params, inter = shape.groups()
    if final in "cnyiw":
        return False
    if final == "t":
        return not prefix and not inter and params.split(";")[0] in ("22", "23")
    if final == "q":
        return prefix != ">"
    if final == "p":
        return "$" not in inter and "+" not in inter
    if final == "u":
        return prefix != "?" and "$" not in inter and "&" not in inter
    if final == "x":
        return bool(inter or prefix)
    if final in "mS":
        return prefix != "?"
    if final == "R":
        return "#" not in inter
    if final == "|":
        return "#" not in inter and "'" not in inter
    if final == "v":
        return '"' not in inter and "," not in inter
    return True


def pty_osc_allowed(payload: str) -> bool:
    """Whether ``pty`` mode lets ``OSC payload ST`` through (see :data:`PTY_OSC_ALLOWED`)."""
    number, _, rest = payload.partition(";")
    if _OSC_NUMBER.fullmatch(number) is None or int(number) not in PTY_OSC_ALLOWED:
        return False
    code = int(number)
    if code in _COLOUR_OSC:
        return "?" not in rest  # OSC 4;1;? and OSC 11;? ask for a colour: an answer
    if code == 9:
        # iTerm2's notification text, and progress (9;4); ConEmu's other numbered 9;N
        # commands (message boxes, macros, waits) are not for a remote program.
        return rest.startswith("4;") or not rest[:1].isdigit()
    return True


class EscapeFilter:
    """Neutralizes terminal-acting sequences in text, chunk by chunk (see the module).

    Attributes:
        mode: ``text`` or ``pty``.
        dropped: the control functions withheld from the terminal so far: each sequence
            or control character shown inert (``text``) or removed (``pty``).
    """

    def __init__(self, mode: FilterMode = "text") -> None:
        self.mode: FilterMode = mode
        self.dropped = 0
        self._state = _GROUND
        self._pending: list[str] = []
        self._held = 0  # characters in _pending (a string's payload is held in slices)
        self._collect = False  # in a string: an OSC being held (else one being skipped)
        self._osc = False  # in a string: it is an OSC (BEL ends it too)

    @property
    def held(self) -> int:
        """Characters held for a sequence not yet complete (bounded, see the module)."""
        return self._held if self._state in (_STRING, _STRING_ESC) else len(self._pending)

    def feed(self, text: str) -> str:
        """The safe rendering of the next ``text``."""
        if self.mode == "pty":
            return self._feed_pty(text)
        out: list[str] = []
        i = 0
        n = len(text)
        while i < n:
            if self._state == _GROUND:
                run = _TEXT_RUN.match(text, i)
                if run is not None:
                    out.append(run.group())
                    i = run.end()
                    continue
                match = _INTERESTING.search(text, i)
                if match is None:
                    out.append(text[i:])
                    break
                out.append(text[i : match.start()])
                char = match.group()
                i = match.end()
                if char != _ESC:
                    out.append(caret(char))
                    self.dropped += 1
                    continue
                csi = _CSI_AT.match(text, match.start())
                if csi is not None and csi.end() - match.start() - 3 <= MAX_CSI_CHARS:
                    self._text_csi(csi.group(1) + csi.group(2), csi.group(3), out)
                    i = csi.end()
                else:
                    self._state = _ESCAPE
            elif self._state == _ESCAPE:
                i = self._text_escape(text[i], i, out)
            else:
                i = self._csi(text, i, out)
        return "".join(out)

    def _text_escape(self, char: str, i: int, out: list[str]) -> int:
        if char == "[":
            self._state = _CSI
            self._pending = []
            return i + 1
        self._state = _GROUND
        if char in _QUIET_ESCAPES:  # keypad mode: noise in a log, dropped
            return i + 1
        out.append("^[")  # the rest is shown as text: inert without its ESC
        self.dropped += 1
        return i

    def _text_csi(self, body: str, final: str, out: list[str]) -> None:
        if _allowed_csi(body, final):
            out.append(f"\x1b[{body}{final}")
        elif _quiet_mode(body, final):
            pass  # a mode toggle that means nothing here (QUIET_MODES): not shown, not counted
        else:
            out.append(f"^[[{body}{final}")
            self.dropped += 1

    def _csi(self, text: str, i: int, out: list[str]) -> int:
        char = text[i]
        code = ord(char)
        if 0x40 <= code <= 0x7E:  # the final byte
            self._text_csi("".join(self._pending), char, out)
            self._pending = []
            self._state = _GROUND
            return i + 1
        if 0x20 <= code <= 0x3F and len(self._pending) < MAX_CSI_CHARS:
            self._pending.append(char)
            return i + 1
        # Not part of a CSI (a control, text, too long): show what we held, go on from here.
        out.append("^[[" + "".join(self._pending))
        self.dropped += 1
        self._pending = []
        self._state = _GROUND
        return i

    # -- pty mode -----------------------------------------------------------------------------

    def _feed_pty(self, text: str) -> str:
        plain = text.isascii() and "\x1b" not in text and "\x05" not in text
        if self._state == _GROUND and plain:
            return text  # plain ASCII (the commonest read): nothing to look at
        out: list[str] = []
        i = 0
        n = len(text)
        while i < n:
            state = self._state
            if state == _GROUND:
                i = self._pty_ground(text, i, out)
            elif state == _ESCAPE:
                i = self._pty_escape(text[i], i, out)
            elif state == _CSI:
                i = self._pty_csi(text[i], i, out)
            elif state == _ESC_INTER:
                i = self._pty_intermediate(text[i], i, out)
            elif state == _STRING:
                i = self._string(text, i, out)
            else:
                i = self._string_escape(text[i], i, out)
        return "".join(out)

    def _pty_ground(self, text: str, i: int, out: list[str]) -> int:
        """Text and whole sequences as far as they go, then one ESC, ENQ or C1 control."""
        run = _PTY_RUN.match(text, i)
        if run is not None:
            out.append(run.group())
            return run.end()
        match = _PTY_INTERESTING.search(text, i)
        if match is None:
            out.append(text[i:])
            return len(text)
        out.append(text[i : match.start()])
        if match.group() == _ESC:
            return self._pty_whole(text, match.start(), out)
        self.dropped += 1  # ENQ (the answerback) or a C1 control
        return match.end()

    def _pty_whole(self, text: str, at: int, out: list[str]) -> int:
        """At an ESC: take a whole CSI or OSC in one step when the text holds it, else
        enter the escape state. Returns where to go on."""
        csi = _CSI_AT.match(text, at)
        if csi is not None and csi.end() - at - 3 <= MAX_CSI_CHARS:
            if pty_csi_allowed(csi.group(1) + csi.group(2), csi.group(3)):
                out.append(csi.group())
            else:
                self.dropped += 1
            return csi.end()
        osc = _OSC_AT.match(text, at)
        if osc is not None and len(osc.group(1)) <= MAX_STRING_CHARS:
            if pty_osc_allowed(osc.group(1)):
                out.append(osc.group())
            else:
                self.dropped += 1
            return osc.end()
        self._state = _ESCAPE
        return at + 1

    def _drop(self, state: int = _GROUND) -> None:
        """Forget a sequence in progress (never written) and count it."""
        self.dropped += 1
        self._pending = []
        self._held = 0
        self._state = state

    def _pty_escape(self, char: str, i: int, out: list[str]) -> int:
        """After ESC: what kind of sequence this is."""
        code = ord(char)
        if char == "[":
            self._state = _CSI
            self._pending = []
            return i + 1
        if char in _STRING_OPENERS:
            self._state = _STRING
            self._pending = []
            self._held = 0
            self._osc = char == "]"
            self._collect = self._osc
            if not self._collect:
                self.dropped += 1  # DCS, SOS, PM, APC: skipped to their end, never held
            return i + 1
        if 0x20 <= code <= 0x2F:
            self._state = _ESC_INTER
            self._pending = [char]
            return i + 1
        if 0x30 <= code <= 0x7E:
            if char in "Z\\":  # DECID (the terminal answers as to DA); an ST ending nothing
                self.dropped += 1
            else:
                out.append(_ESC + char)
            self._state = _GROUND
            return i + 1
        # A control, DEL or a non-ASCII character: a terminal would act on a C0 control and
        # stay in its escape state, so the ESC is dropped and the character read afresh.
        self._drop()
        return i

    def _pty_intermediate(self, char: str, i: int, out: list[str]) -> int:
        code = ord(char)
        if 0x30 <= code <= 0x7E:
            out.append(_ESC + "".join(self._pending) + char)
            self._pending = []
            self._state = _GROUND
            return i + 1
        if 0x20 <= code <= 0x2F and len(self._pending) < MAX_ESC_INTERMEDIATES:
            self._pending.append(char)
            return i + 1
        self._drop()
        return i

    def _pty_csi(self, char: str, i: int, out: list[str]) -> int:
        code = ord(char)
        if 0x40 <= code <= 0x7E:  # the final byte
            body = "".join(self._pending)
            if pty_csi_allowed(body, char):
                out.append(f"\x1b[{body}{char}")
                self._pending = []
                self._state = _GROUND
            else:
                self._drop()
            return i + 1
        if 0x20 <= code <= 0x3F and len(self._pending) < MAX_CSI_CHARS:
            self._pending.append(char)
            return i + 1
        # Not part of a CSI (a control, text, too long): it is dropped; go on from here.
        self._drop()
        return i

    def _string(self, text: str, i: int, out: list[str]) -> int:
        """Inside OSC/DCS/SOS/PM/APC: hold (an OSC) or skip the payload up to a control."""
        match = _STRING_STOP.search(text, i)
        end = match.start() if match is not None else len(text)
        if self._collect and end > i:
            if self._held + end - i > MAX_STRING_CHARS:
                self._drop(_STRING)  # too long: skipped from here on
                self._collect = False
            else:
                self._pending.append(text[i:end])
                self._held += end - i
        if match is None:
            return len(text)
        char = match.group()
        if char == _ESC:
            self._state = _STRING_ESC
        elif char == _BEL and self._osc:
            self._end_string(_BEL, out)
        elif char in _CANCEL:
            self._end_string("", out)
        elif char in _C1_ST:
            self._end_string("", out)  # an 8-bit ST: not re-sent (not a UTF-8 terminal's)
        elif self._collect:
            self._drop(_STRING)  # a control inside an OSC: the whole OSC goes
            self._collect = False
        return match.end()

    def _string_escape(self, char: str, i: int, out: list[str]) -> int:
        if char == "\\":
            self._end_string("\x1b\\", out)
            return i + 1
        # ESC then anything else ends the string (as terminals do) and starts a sequence.
        self._end_string("", out)
        self._state = _ESCAPE
        return i

    def _end_string(self, terminator: str, out: list[str]) -> None:
        """The string ended: write a held OSC that is allowed (with ``terminator``)."""
        if self._collect:
            payload = "".join(self._pending)
            if terminator and pty_osc_allowed(payload):
                out.append("\x1b]" + payload + terminator)
            else:
                self.dropped += 1
        self._pending = []
        self._held = 0
        self._collect = False
        self._state = _GROUND

    def close(self) -> str:
        """What is still held, rendered inert (``text``) or dropped (``pty``): the input
        ended inside a sequence."""
        held = ""
        if self.mode == "pty":
            if self._state in (_ESCAPE, _CSI, _ESC_INTER) or (
                self._state in (_STRING, _STRING_ESC) and self._collect
            ):
                self.dropped += 1
        elif self._state == _ESCAPE:
            held = "^["
            self.dropped += 1
        elif self._state == _CSI:
            held = "^[[" + "".join(self._pending)
            self.dropped += 1
        self._state = _GROUND
        self._pending = []
        self._held = 0
        self._collect = False
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


class TerminalFilter:
    """A command's output bytes to bytes safe for the operator's terminal, chunk by chunk
    (``glove exec`` and ``glove run`` on a terminal; see the module for the two modes).

    ``text`` decodes UTF-8 with invalid bytes as U+FFFD, like :class:`LogFilter`; ``pty``
    keeps bytes that are not UTF-8 as they are (``surrogateescape``), so output without a
    dangerous sequence comes out byte for byte.
    """

    def __init__(self, mode: FilterMode) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(
            "replace" if mode == "text" else "surrogateescape"
        )
        self._filter = EscapeFilter(mode)

    @property
    def dropped(self) -> int:
        """Sequences and control characters withheld from the terminal so far."""
        return self._filter.dropped

    @property
    def held(self) -> int:
        """Characters held for a sequence not yet complete."""
        return self._filter.held

    def feed(self, data: bytes) -> bytes:
        """The safe bytes of the next ``data``."""
        return self._filter.feed(self._decoder.decode(data)).encode("utf-8", "surrogateescape")

    def close(self) -> bytes:
        """The safe bytes of whatever is still held (the output ended)."""
        tail = self._filter.feed(self._decoder.decode(b"", final=True)) + self._filter.close()
        return tail.encode("utf-8", "surrogateescape")


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
