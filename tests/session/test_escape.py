"""The log filter neutralizes sequences that act on a terminal; the mode tracker follows modes."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.session._escape import (
    MAX_CSI_CHARS,
    MAX_STRING_CHARS,
    EscapeFilter,
    LogFilter,
    ModeTracker,
    TerminalFilter,
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


# -- pty mode: a TUI's sequences kept, the dangerous subset dropped --------------------------


def pty(data: bytes) -> tuple[bytes, int]:
    """``pty`` mode's output and the count it dropped."""
    flt = TerminalFilter("pty")
    out = flt.feed(data) + flt.close()
    return out, flt.dropped


@pytest.mark.parametrize(
    "hostile",
    [
        b"\x1b]52;c;aGVsbG8=\x07",  # clipboard write
        b"\x1b]52;c;?\x1b\\",  # clipboard read
        b"\x1b]50;?\x07",  # font query
        b"\x1b]11;?\x07",  # background colour query
        b"\x1b]4;1;rgb:00/00/00;2;?\x07",  # a palette query after a setting
        b"\x1b]1337;File=name=eA==:QUFB\x07",  # iTerm2 file transfer
        b"\x1b]5113;ac=recv\x1b\\",  # kitty file transfer
        b"\x1b]9;2;message box\x07",  # ConEmu's numbered commands
        b'\x1bP$q"p\x1b\\',  # DECRQSS
        b"\x1bP+q544e\x1b\\",  # XTGETTCAP
        b"\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\",  # tmux passthrough
        b"\x1b_Ga=q,i=1;AAAA\x1b\\",  # kitty graphics query (APC)
        b"\x1b^pm\x1b\\",  # PM
        b"\x1bXsos\x1b\\",  # SOS
        b"\x1b[c",  # DA1
        b"\x1b[>c",  # DA2
        b"\x1b[=c",  # DA3
        b"\x1b[5n",  # device status
        b"\x1b[6n",  # cursor position report
        b"\x1b[?6n",  # DECXCPR
        b"\x1b[>0q",  # XTVERSION
        b"\x1b[?2026$p",  # DECRQM
        b"\x1b[21t",  # title report
        b"\x1b[14t",  # window size report
        b"\x1b[3;10;10t",  # move the window
        b"\x1b[1;1;2;2*y",  # DECRQCRA: a checksum of the screen
        b"\x1b[?u",  # kitty keyboard query
        b"\x1b[1$u",  # DECRQTSR
        b"\x1b[x",  # DECREQTPARM
        b"\x1b[?4m",  # XTQMODKEYS
        b"\x1b[?1;1S",  # XTSMGRAPHICS
        b"\x1b[#R",  # XTREPORTCOLORS
        b"\x1b[5i",  # media copy
        b"\x1bZ",  # DECID
        b"\x05",  # ENQ: the answerback
        "\u009b6n".encode(),  # C1 CSI as a character
        b"\x9b6n",  # a raw C1 byte
        "\u009d52;c;eA==\u009c".encode(),  # C1 OSC
    ],
)
def test_pty_mode_drops_clipboard_access_queries_and_string_sequences(hostile: bytes) -> None:
    """Each sequence that writes or reads the clipboard, asks the terminal something, or
    reaches a terminal-specific parser is removed whole (none of its ESC is written) and
    counted; the text around it is kept."""
    out, dropped = pty(b"before " + hostile + b" after")
    assert out.startswith(b"before ")
    assert out.endswith(b" after")
    assert b"\x1b" not in out, out
    assert b"\x05" not in out
    assert dropped >= 1


def test_pty_mode_keeps_a_tuis_frame_byte_for_byte() -> None:
    """The alternate screen, cursor styles and visibility, mouse and paste modes, the kitty
    keyboard stack, scrolling regions, charsets, titles, hyperlinks, colour settings,
    prompt marks, progress and text that is not UTF-8 all pass unchanged; nothing is
    counted."""
    frame = (
        b"\x1b[?1049h\x1b[?25l\x1b[?1000;1006h\x1b[?2004h\x1b[>1u\x1b[2 q\x1b[1;24r"
        b"\x1b(0lqk\x1b(B\x1b]0;claude\x07\x1b]2;title\x1b\\\x1b]8;id=1;https://x.test/?a=1"
        b"\x1b\\link\x1b]8;;\x1b\\\x1b]11;#101010\x07\x1b]4;1;rgb:ff/00/00\x07\x1b]104\x07"
        b"\x1b]133;A\x07\x1b]9;4;1;50\x07\x1b]9;done\x07\x1b[38;5;196m\x1b[48;2;1;2;3m"
        b"\xe2\x94\x80 \xff\xfe\x1b[H\x1b[2J\x1b[22;0t\x1b[23;0t\x1b7\x1b8\x1b=\x1b>\x1bM"
        b"\x1b[<u\x1b[?25h\x1b[?1049l\x07\r\n"
    )
    assert pty(frame) == (frame, 0)


@given(st.binary(max_size=2000), st.lists(st.integers(1, 50), max_size=40))
@settings(max_examples=300)
def test_pty_mode_is_independent_of_chunking_and_only_removes(data: bytes, cuts: list[int]) -> None:
    """Any bytes, cut anywhere: the same output and count as in one piece, and the output
    is the input with parts removed (never a byte added or reordered)."""
    whole, dropped = pty(data)
    flt = TerminalFilter("pty")
    parts: list[bytes] = []
    at = 0
    for cut in cuts:
        parts.append(flt.feed(data[at : at + cut]))
        at += cut
    parts.append(flt.feed(data[at:]))
    parts.append(flt.close())
    assert b"".join(parts) == whole
    assert flt.dropped == dropped
    rest = iter(data)
    assert all(byte in rest for byte in whole)


PTY_ALPHABET = "\x1b[]?P_0123456789;:>$*cnqtuxhl\\\x07\x18 Ab"


@given(st.text(alphabet=st.sampled_from(PTY_ALPHABET), max_size=300))
@settings(max_examples=300)
def test_pty_mode_never_writes_a_query(text: str) -> None:
    """Text made of escape-sequence characters never yields a DA, DSR, XTVERSION, DECRQM,
    window report or string sequence in pty mode."""
    flt = EscapeFilter("pty")
    out = flt.feed(text) + flt.close()
    for match in re.finditer(r"\x1b(\[([<=>?]?)([0-9;:]*)([ -/]*)([@-~])|.)", out, re.S):
        assert match.group(1)[:1] not in "]P_X^Z", repr(out)
        final = match.group(5)
        assert final not in ("c", "n"), repr(out)
        assert not (final == "q" and match.group(2) == ">"), repr(out)
        assert not (final == "p" and "$" in match.group(4)), repr(out)
        assert not (final == "t" and match.group(3).split(";")[0] not in ("22", "23")), repr(out)


def test_an_escape_cut_short_by_a_control_cannot_join_what_follows() -> None:
    """ESC, then a control a terminal would act on while still in its escape state, then
    ``[6n``: the ESC is dropped, so the terminal sees text, not a cursor position query."""
    assert pty(b"\x1b\n[6n") == (b"\n[6n", 1)
    assert pty(b"\x1b[1\r6n") == (b"\r6n", 1)
    assert pty(b"\x1b]0;t\x1b[6n") == (b"", 2)  # ESC ends the OSC and starts the query


def test_pty_mode_holds_no_more_than_one_osc() -> None:
    """A megabyte OSC that never ends is skipped without being held (held stays under
    MAX_STRING_CHARS), counted once, and output resumes after its terminator."""
    flt = TerminalFilter("pty")
    assert flt.feed(b"\x1b]8;;https://") == b""
    for _ in range(1000):
        assert flt.feed(b"A" * 1024) == b""
        assert flt.held <= MAX_STRING_CHARS
    assert flt.feed(b"\x1b\\visible") == b"visible"
    assert flt.dropped == 1
    long_csi = flt.feed(b"\x1b[" + b"1;" * 100 + b"m")  # over MAX_CSI_CHARS: dropped
    assert b"\x1b" not in long_csi
    assert flt.held == 0


def test_text_mode_counts_what_it_shows_inert() -> None:
    """In text mode every control shown inert is counted; allowed drawing sequences are not."""
    flt = TerminalFilter("text")
    out = flt.feed(b"\x1b[1mB\x1b[6n\x07\x1b]0;t\x07") + flt.close()
    assert out == b"\x1b[1mB^[[6n^G^[]0;t^G"
    assert flt.dropped == 4


FAST_ALPHABET = "\x1b[]?<=>()0123456789;:mHJKhlqurscnt$ #B78M\x07\\\x05\x9b\u2500ab\n"


@pytest.mark.parametrize("mode", ["text", "pty"])
@given(text=st.text(alphabet=st.sampled_from(FAST_ALPHABET), max_size=400))
@settings(max_examples=400)
def test_the_fast_paths_decide_as_the_state_machine_does(mode: str, text: str) -> None:
    """Fed whole (the runs and whole-sequence fast paths take what they can) or one
    character at a time (only the state machine runs), the output and the count agree."""
    whole = EscapeFilter(mode)  # type: ignore[arg-type]
    expected = whole.feed(text) + whole.close()
    slow = EscapeFilter(mode)  # type: ignore[arg-type]
    assert "".join(slow.feed(char) for char in text) + slow.close() == expected
    assert slow.dropped == whole.dropped
