"""The log filter neutralizes sequences that act on a terminal; the mode tracker follows modes."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.session._escape import (
    MAX_CSI_CHARS,
    EscapeFilter,
    LogFilter,
    ModeTracker,
    TerminalModes,
    caret,
)

#: What may reach the operator's terminal: text, TAB LF CR BS, and allowed CSIs only.
SAFE_CSI = re.compile(r"\x1b\[[0-9;:]*[mABCDEFGHJKSTfdLMPX@]")
CONTROL = re.compile(r"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def assert_safe(text: str) -> None:
    """Every ESC starts an allowed CSI; no other control character is left."""
    stripped = SAFE_CSI.sub("", text)
    assert CONTROL.search(stripped) is None, repr(stripped[:200])


def render(data: bytes) -> str:
    log = LogFilter()
    return log.feed(data) + log.close()


@pytest.mark.parametrize(
    ("hostile", "shown"),
    [
        (b"\x1b]52;c;aGVsbG8=\x07", "^[]52;c;aGVsbG8=^G"),  # clipboard write
        (b"\x1b]0;pwned\x07", "^[]0;pwned^G"),  # window title
        (b"\x1b]2;pwned\x1b\\", "^[]2;pwned^[\\"),  # title, ST-terminated
        (b'\x1bP$q"p\x1b\\', '^[P$q"p^[\\'),  # DCS (DECRQSS)
        (b"\x1b[6n", "^[[6n"),  # cursor position report (answered as input)
        (b"\x1b[c", "^[[c"),  # primary device attributes
        (b"\x1b[>0c", "^[[>0c"),  # secondary device attributes
        (b"\x1b[21t", "^[[21t"),  # report the window title
        (b"\x1b[3J", "^[[3J"),  # erase the operator's scrollback
        (b"\x1b[?1049h", "^[[?1049h"),  # alternate screen
        (b"\x1b[?1000h", "^[[?1000h"),  # mouse reporting
        (b"\x1bc", "^[c"),  # full reset
        (b"\x1b(0", "^[(0"),  # line-drawing charset
        (b"\x9b6n", "\ufffd6n"),  # a raw C1 byte is not UTF-8
        ("\u009b6n".encode(), "M-^[6n"),  # C1 CSI as a UTF-8 character
        (b"\x1b_payload\x1b\\", "^[_payload^[\\"),  # APC
        (b"\x1b[99999C", "^[[99999C"),  # a huge repeat count
        (b"\x07\x0e\x7f", "^G^N^?"),  # bell, shift-out, delete
    ],
)
def test_sequences_that_act_on_a_terminal_are_shown_inert(hostile: bytes, shown: str) -> None:
    """OSC 52, titles, DCS/APC, queries, scrollback erase, private modes, resets and C1
    controls come out in ^[ notation, never as live sequences."""
    text = render(b"before " + hostile + b" after")
    assert text == f"before {shown} after"
    assert_safe(text)


def test_colours_and_cursor_motion_pass_through() -> None:
    """SGR (including true colour), cursor motion, erase line, TAB/LF/CR/BS stay live."""
    data = b"\x1b[1;31mred\x1b[0m \x1b[38;2;1;2;3mrgb\x1b[m\r\n\tA\bB\x1b[2K\x1b[10;20H\x1b[2J"
    assert render(data) == data.decode()


def test_invalid_utf8_is_replaced_and_text_survives() -> None:
    """Bytes that are not UTF-8 become U+FFFD; the text around them is kept."""
    assert render(b"ok \xff\xfe ok \xe2\x82\xac") == "ok \ufffd\ufffd ok \u20ac"


def test_an_unterminated_flood_costs_no_memory() -> None:
    """A megabyte OSC that never ends, and a CSI longer than the cap, stream out as text
    without being held: the filter's pending buffer stays under MAX_CSI_CHARS."""
    flt = EscapeFilter()
    out = [flt.feed("\x1b]52;c;")]
    for _ in range(1000):
        out.append(flt.feed("A" * 1024))
        assert len(flt._pending) == 0
    assert "".join(out).startswith("^[]52;c;AAAA")
    out = flt.feed("\x1b[" + "1;" * 1000 + "m")
    assert len(flt._pending) <= MAX_CSI_CHARS
    assert_safe(out + flt.close())


@given(st.binary(max_size=2000), st.lists(st.integers(1, 50), max_size=40))
@settings(max_examples=300)
def test_output_is_safe_and_independent_of_chunking(data: bytes, cuts: list[int]) -> None:
    """Any bytes, cut anywhere: the output is safe and the same as in one piece, and at most
    four characters per input character."""
    whole = render(data)
    assert_safe(whole)
    log = LogFilter()
    parts: list[str] = []
    at = 0
    for cut in cuts:
        parts.append(log.feed(data[at : at + cut]))
        at += cut
    parts.append(log.feed(data[at:]))
    parts.append(log.close())
    assert "".join(parts) == whole
    assert len(whole) <= 4 * len(data) + 4


@given(st.text(alphabet=st.sampled_from("\x1b[?]0123456789;:hlmPc\\\x07\x9bAB x"), max_size=300))
@settings(max_examples=300)
def test_escape_heavy_text_is_always_safe(text: str) -> None:
    """Text made mostly of escape-sequence characters never yields a live unsafe one."""
    flt = EscapeFilter()
    assert_safe(flt.feed(text) + flt.close())


def test_caret_notation() -> None:
    """ESC, DEL and C1 controls in cat -v notation."""
    shown = [caret(c) for c in "\x1b\x7f\x9b\x00"]
    assert shown == ["^[", "^?", "M-^[", "^@"]


def test_the_tracker_follows_modes_across_chunks() -> None:
    """Alternate screen, hidden cursor, mouse and keypad, each cut mid-sequence, are
    followed; a full reset clears them; restore and reset say what to send."""
    tracker = ModeTracker()
    stream = b"x\x1b[?1049h\x1b[?25l\x1b[?1000;1006h\x1b=y"
    for i in range(len(stream)):
        tracker.feed(stream[i : i + 1])
    modes = tracker.modes
    assert modes == TerminalModes(on=(1000, 1006, 1049), off=(25,), keypad=True)
    assert modes.restore() == b"\x1b[?1049h\x1b[?1000h\x1b[?1006h\x1b[?25l\x1b="
    reset = modes.reset()
    for part in (b"\x1b[?1049l", b"\x1b[?25h", b"\x1b[?1000l", b"\x1b[?1006l", b"\x1b>"):
        assert part in reset
    tracker.feed(b"\x1b[?1000l\x1b[?25h")
    assert tracker.modes == TerminalModes(on=(1006, 1049), keypad=True)
    tracker.feed(b"\x1bc")
    assert tracker.modes == TerminalModes()
    assert TerminalModes().reset() == b"\x1b[0m\x1b[?25h"


@given(st.binary(max_size=400), st.integers(1, 30))
@settings(max_examples=200)
def test_the_tracker_does_not_depend_on_chunking(data: bytes, step: int) -> None:
    """Fed whole or in pieces, the tracker ends in the same modes."""
    whole = ModeTracker()
    whole.feed(data)
    pieces = ModeTracker()
    for at in range(0, len(data), step):
        pieces.feed(data[at : at + step])
    assert pieces.modes == whole.modes
