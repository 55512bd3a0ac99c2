"""The glove-text-v1 normalizer: golden vectors, chunk invariance, the reference machine."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.evaluate import NORMALIZER_VERSION, TextNormalizer, normalize
from tests.evaluate.reference import reference_normalize

#: Pieces a hostile or a busy terminal program emits, for the generated streams.
PIECES = [
    b"\x1b[0m",
    b"\x1b[38;5;196m",
    b"\x1b[?2004h",
    b"\x1b[200~",
    b"\x1b]0;title\x07",
    b"\x1b]52;c;Zm9v\x1b\\",
    b"\x1bP1$r0m\x1b\\",
    b"\x1b_apc\x1b\\",
    b"\x1b(B",
    b"\x1bOA",
    b"\xc2\x9b1m",
    b"\xc2\x9d0;t\xc2\x9c",
    b"\xc2\xa9",
    b"\xc2",
    b"\x9b",
    b"\x1b",
    b"[",
    b"]",
    b"\x07",
    b"\x18",
    b"\x1a",
    b"\r\n",
    b"\t",
    b"\x00",
    b"\x7f",
    b"\xff",
    b"FOR",
    b"BIDDEN",
    b"text ",
]
streams = st.lists(st.sampled_from(PIECES), max_size=40).map(b"".join) | st.binary(max_size=200)


def chunked(data: bytes, cuts: list[int]) -> bytes:
    """Normalize ``data`` fed in pieces cut at ``cuts`` (positions, any order)."""
    normalizer = TextNormalizer()
    out = []
    start = 0
    for cut in sorted({min(max(c, 0), len(data)) for c in cuts}):
        out.append(normalizer.feed(data[start:cut]))
        start = cut
    out.append(normalizer.feed(data[start:]))
    out.append(normalizer.finish())
    return b"".join(out)


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"FOR\x1b[0mBIDDEN", b"FORBIDDEN"),
        (b"\x1b[1;31mred\x1b[m plain", b"red plain"),
        # pexpect #824: bracketed paste mode toggles leak into matches.
        (b"\x1b[?2004hprompt$ \x1b[?2004l", b"prompt$ "),
        (b"\x1b[200~pasted\x1b[201~", b"pasted"),
        # pexpect #529: erase-line splits "--More--".
        (b"--More--\x1b[K\r", b"--More--"),
        (b"\x1b]0;window title\x07after", b"after"),
        (b"\x1b]2;title\x1b\\after", b"after"),
        (b"\x1b]52;c;c2VjcmV0\x07", b""),
        (b"\x1bPq#0;2;0;0;0#1~~\x1b\\x", b"x"),
        (b"\x1b_apc payload\x1b\\y", b"y"),
        (b"\x1b^pm\x07z", b"z"),
        (b"\x1bXsos\x07w", b"w"),
        (b"\x1b(Bascii\x1b)0", b"ascii"),
        (b"\x1bOAup\x1bNn", b"Aupn"),  # SS3/SS2: the next character is shown, so kept
        (b"\x1b7saved\x1b8", b"saved"),
        (b"\xc2\x9b31mc1\xc2\x9bm", b"c1"),
        (b"\xc2\x9d0;t\xc2\x9cv", b"v"),
        (b"caf\xc3\xa9 \xc2\xa9", b"caf\xc3\xa9 \xc2\xa9"),
        (b"a\r\nb\tc\x08d\x07e\x00f\x7fg", b"a\nb\tcdefg"),
        (b"\x1b[31\x18x", b"x"),  # CAN aborts the CSI
        (b"\x1b]0;t\x1b[0mvisible\x07", b"visible"),  # ESC ends the OSC string
        (b"\x1b[3\xc3\xa9", b"\xc3\xa9"),  # a non-ASCII byte ends an open CSI and is text
        (b"\x1b[2\nJx", b"x"),  # a C0 inside a CSI is part of it
        (b"end\x1b[", b"end"),  # an open sequence at the end is dropped
        (b"end\x1b", b"end"),
        (b"end\xc2", b"end\xc2"),  # a lone C2 at the end is text
    ],
)
def test_golden_vectors(raw: bytes, text: bytes) -> None:
    """Each sequence kind is removed and the text around it kept, whole and byte by byte."""
    assert normalize(raw) == text
    assert chunked(raw, list(range(len(raw)))) == text
    assert reference_normalize(raw) == text


def test_the_version_is_named() -> None:
    """The normalizer's version string is the one evidence carries."""
    assert NORMALIZER_VERSION == "glove-text-v1"


@settings(max_examples=400, deadline=None)
@given(streams, st.lists(st.integers(0, 200), max_size=12))
def test_any_chunking_gives_the_same_text(data: bytes, cuts: list[int]) -> None:
    """The text does not depend on where the stream was cut."""
    assert chunked(data, cuts) == normalize(data)


@settings(max_examples=400, deadline=None)
@given(streams)
def test_the_text_equals_the_byte_at_a_time_reference(data: bytes) -> None:
    """The regex implementation agrees with the naive per-byte state machine."""
    assert normalize(data) == reference_normalize(data)


def test_an_unterminated_string_costs_no_memory() -> None:
    """A megabyte inside an open OSC is dropped as it arrives: nothing is held back."""
    normalizer = TextNormalizer()
    assert normalizer.feed(b"\x1b]0;") == b""
    for _ in range(16):
        assert normalizer.feed(b"x" * 65536) == b""
        assert len(normalizer._pending) == 0
    assert normalizer.feed(b"\x07after") == b"after"


def test_at_most_two_bytes_are_held_back() -> None:
    """A chunk ending in ESC C2 holds exactly those two bytes, whatever came before."""
    normalizer = TextNormalizer()
    assert normalizer.feed(b"abc\x1b[1;2\x1b\xc2") == b"abc"
    assert normalizer._pending == b"\x1b\xc2"
    assert not normalizer.settled
    assert normalizer.feed(b"\xa9") == b"\xc2\xa9"
    assert normalizer.settled


def test_finish_resets_the_normalizer() -> None:
    """After finish the next feed starts from the ground state."""
    normalizer = TextNormalizer()
    normalizer.feed(b"\x1b]0;open")
    assert normalizer.finish() == b""
    assert normalizer.feed(b"text") == b"text"
