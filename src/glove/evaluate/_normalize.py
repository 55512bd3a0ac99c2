"""The text normalizer ``glove-text-v1``: PTY bytes with escape sequences and controls
removed, streamed, bounded, and the same however the stream is cut (sans-IO).

Forbidden literals are looked for in the raw bytes *and* in this text, so that
``FOR\\x1b[0mBIDDEN``, which a terminal shows as ``FORBIDDEN``, is found; required
literals only in this text, so a literal hidden in a window title does not count.

The rules, on bytes (UTF-8 C1 controls are the two bytes ``C2 80`` .. ``C2 9F``), after
ECMA-48 and the DEC parser state machine (vt100.net/emu/dec_ansi_parser), simplified::

    CSI      ESC [  or C1 CSI      parameters/intermediates 0x20-0x3F, then a final
                                   0x40-0x7E                                   removed
    strings  ESC ] P X ^ _  or     OSC, DCS, SOS, PM, APC: everything up to BEL, or up to
             C1 OSC DCS SOS PM APC the next ESC / CAN / SUB / C1 control (ST is ESC \\ or
                                   C1 ST, each removed in its turn)           removed
    escape   ESC, intermediates 0x20-0x2F, a final 0x30-0x7E (two-byte ESC sequences,
             SS2/SS3 ESC N / ESC O, charset designations ESC ( B ...)          removed
    controls C0 other than newline and tab (CR, BS, BEL, CAN, ...), DEL, C1   removed
    text     everything else, including tab, newline and any non-ASCII byte    kept

* Inside a CSI or an ESC sequence, C0 controls and DEL are part of the sequence (removed
  with it; a terminal would execute them and stay in the sequence).
* ESC, CAN, SUB and any C1 control end whatever sequence is open, from any state; a byte
  0x80 or above (not C1) also ends an open CSI or ESC sequence and is text itself.
* At the end of the stream an open sequence is dropped; a lone ``C2`` byte is text
  (the UTF-8 check reports it as a truncated sequence anyway).

What it does not do, by design: emulate a screen. Text that a terminal would overwrite
(``\\r``, backspace, cursor motion) is kept, and text assembled on screen by cursor motion
is not assembled here. The rules, and so :data:`NORMALIZER_VERSION`, never change: a new
rule set is a new version, and the version is in every piece of evidence.

Memory is one small integer of state plus at most two pending bytes (an ``ESC``, or a
``C2`` whose meaning depends on the next byte); the bodies of open sequences are dropped
as they arrive, never buffered. The work is done by ``re`` in C: per chunk, one ``sub``
over the chunk and one match near its end to learn the state it ends in.
"""

from __future__ import annotations

import re
from typing import Final

NORMALIZER_VERSION: Final = "glove-text-v1"
"""The name and version of the rules above; part of every piece of evidence."""

# Bytes of an open CSI (parameters, intermediates, C0 but CAN/SUB/ESC, DEL).
_CSI_BODY: Final = rb"[\x00-\x17\x19\x1c-\x3f\x7f]"
# Bytes of an open ESC sequence (intermediates, C0 but CAN/SUB/ESC, DEL).
_ESC_BODY: Final = rb"[\x00-\x17\x19\x1c-\x2f\x7f]"
# Bytes of a control string: anything but BEL, CAN, SUB, ESC and a C1 control (a C2 byte
# not followed by 80..9F is text, also at the end of what is being matched).
_STR_BODY: Final = rb"(?:[^\x07\x18\x1a\x1b\xc2]|\xc2(?![\x80-\x9f]))"

#: Every sequence that starts with ESC or a C1 control, open ones included (an open one
#: runs to the end of what is matched, which ends at the next synchronizing byte). The
#: standalone C0 controls and DEL are left to ``bytes.translate`` (:data:`CONTROLS`).
_SEQUENCE: Final = re.compile(
    rb"\x1b\[" + _CSI_BODY + rb"*[\x40-\x7e]?"
    rb"|\x1b(?:[\]PX^_]" + _STR_BODY + rb"*\x07?|" + _ESC_BODY + rb"*[\x30-\x7e]?)"
    rb"|\xc2(?:\x9b" + _CSI_BODY + rb"*[\x40-\x7e]?|[\x90\x98\x9d-\x9f]" + _STR_BODY + rb"*\x07?"
    rb"|[\x80-\x9f])"
)
#: The common case, fast: a complete ESC-CSI (SGR, cursor motion, erase ...).
_COMPLETE_CSI: Final = re.compile(rb"\x1b\[" + _CSI_BODY + rb"*[\x40-\x7e]")
#: A C1 control in UTF-8.
_C1: Final = re.compile(rb"\xc2[\x80-\x9f]")
#: The standalone controls removed: C0 but tab and newline (ESC is never left), and DEL.
CONTROLS: Final = bytes([*range(0x09), *range(0x0B, 0x20), 0x7F])

#: One token starting at a synchronizing byte, with the parts that say whether a
#: sequence is closed captured (used once per chunk, on its last token).
_TOKEN: Final = re.compile(
    rb"(?P<csi>(?:\x1b\[|\xc2\x9b)" + _CSI_BODY + rb"*)(?P<csi_end>[\x40-\x7e])?"
    rb"|(?P<str>(?:\x1b[\]PX^_]|\xc2[\x90\x98\x9d-\x9f])" + _STR_BODY + rb"*)(?P<str_end>\x07)?"
    rb"|(?P<esc>\x1b" + _ESC_BODY + rb"*)(?P<esc_end>[\x30-\x7e])?"
    rb"|[\x18\x1a]"
    rb"|\xc2[\x80-\x9f]"
)
#: The rest of a sequence left open by the previous chunk, by state.
_CSI_REST: Final = re.compile(_CSI_BODY + rb"*(?P<end>[\x40-\x7e])?")
_ESC_REST: Final = re.compile(_ESC_BODY + rb"*(?P<end>[\x30-\x7e])?")
_STR_REST: Final = re.compile(_STR_BODY + rb"*(?P<end>\x07)?")
_GROUND_STATE: Final = 0
_CSI_STATE: Final = 1
_ESC_STATE: Final = 2
_STR_STATE: Final = 3

_RESTS: Final = {_CSI_STATE: _CSI_REST, _ESC_STATE: _ESC_REST, _STR_STATE: _STR_REST}
_OPEN: Final = {"csi": _CSI_STATE, "str": _STR_STATE, "esc": _ESC_STATE}


def strip_region(region: bytes) -> bytes:
    """The text of ``region`` read from the ground state, where ``region`` ends where a
    token ends (at a synchronizing byte, or at the end of the stream): every sequence in
    it, closed or cut off by the end, is removed."""
    if b"\x1b" not in region and b"\xc2" not in region:
        return region.translate(None, CONTROLS)
    # Complete ESC-CSI sequences first, each replaced by one CAN. An ESC starts a token
    # wherever it is and no token's body holds an ESC, so these matches are exactly the
    # stream's complete CSI tokens; CAN, like the ESC it stands for, ends whatever came
    # before, keeps the bytes around it from forming a C1 control, starts nothing, and is
    # deleted with the other controls. Only if an ESC or a C1 control is left does the
    # general pattern run, and then over the few sequences that remain.
    text = _COMPLETE_CSI.sub(b"\x18", region)
    if b"\x1b" in text or (b"\xc2" in text and _C1.search(text)):
        text = _SEQUENCE.sub(b"", text)
    return text.translate(None, CONTROLS)


def normalize(data: bytes) -> bytes:
    """The normalized text of a whole stream (one chunk, then the end)."""
    normalizer = TextNormalizer()
    return normalizer.feed(data) + normalizer.finish()


class TextNormalizer:
    """The streaming form of :func:`normalize` (module docstring).

    ``feed`` each chunk in order, then ``finish`` once; the concatenation of what they
    return does not depend on how the stream was cut.
    """

    __slots__ = ("_pending", "_state")

    def __init__(self) -> None:
        self._state = _GROUND_STATE
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """The text of ``chunk`` that is settled now (bytes whose meaning depends on the
        next chunk, at most two, are held back)."""
        data = self._pending + chunk if self._pending else chunk
        # A trailing C2 (a C1 control, or the lead byte of a character) and an ESC before
        # it (whose sequence's kind depends on the next byte) wait for the next chunk.
        # An ESC ends whatever sequence was open, so the state before it does not matter.
        cut = len(data)
        if cut and data[cut - 1] == 0xC2:
            cut -= 1
        if cut and data[cut - 1] == 0x1B:
            cut -= 1
        self._pending = data[cut:]
        escape_pending = self._pending[:1] == b"\x1b"
        pos = 0
        if self._state != _GROUND_STATE:
            match = _RESTS[self._state].match(data, 0, cut)
            assert match is not None  # every pattern matches the empty string
            if match.end() == cut and match.group("end") is None:
                if escape_pending:
                    self._state = _GROUND_STATE
                return b""  # the whole chunk is inside the sequence
            pos = match.end()
            self._state = _GROUND_STATE
        if pos == cut:
            return b""
        # A sequence still open at the cut started at the last synchronizing byte; all of
        # it is removed, so only what lies before it needs reading.
        state, end = _open_tail(data, pos, cut)
        if not escape_pending:
            self._state = state
        if pos == 0 and end == len(data):
            return strip_region(data)
        return strip_region(data[pos:end])

    @property
    def settled(self) -> bool:
        """Whether nothing is open or held back: the next chunk is read from the ground
        state, and one holding no ESC and no C2 byte reads as ``strip_region(chunk)``."""
        return self._state == _GROUND_STATE and not self._pending

    def finish(self) -> bytes:
        """The text still held back at the end of the stream: a lone ``C2`` byte (text),
        never an ESC or an open sequence (dropped).

        The normalizer is back in its initial state afterwards."""
        pending = self._pending
        state = self._state
        self._pending = b""
        self._state = _GROUND_STATE
        if pending[-1:] == b"\xc2" and (state != _STR_STATE or pending[:1] == b"\x1b"):
            return b"\xc2"
        return b""


def _last_sync(data: bytes, pos: int, cut: int) -> int:
    """Where the last synchronizing byte of ``data[pos:cut]`` starts (an ESC, CAN, SUB or
    C1 control, each of which starts a token whatever the state), or -1."""
    last = max(data.rfind(b"\x1b", pos, cut), data.rfind(b"\x18", pos, cut))
    last = max(last, data.rfind(b"\x1a", pos, cut))
    start = max(last + 1, pos)
    if data.find(b"\xc2", start, cut) >= 0:
        for match in _C1.finditer(data, start, cut):
            last = match.start()
    return last


def _open_tail(data: bytes, pos: int, cut: int) -> tuple[int, int]:
    """``(state, start)`` after ``data[pos:cut]`` read from the ground state: the state of
    the sequence opened by the last synchronizing byte and where it starts, if it is still
    open at ``cut``; else ``(ground, cut)``."""
    start = _last_sync(data, pos, cut)
    if start < 0:
        return _GROUND_STATE, cut
    token = _TOKEN.match(data, start, cut)
    assert token is not None  # a synchronizing byte always starts a token
    if token.end() == cut:
        kind = token.lastgroup
        if kind in _OPEN:  # not "<kind>_end": the sequence has not ended
            return _OPEN[kind], start
    return _GROUND_STATE, cut
