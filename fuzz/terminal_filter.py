"""Fuzz target: output bytes -> the terminal filters' safe output, and the mode tracker.

Contract under test (``glove.session._escape``): for any bytes, cut into chunks at
fuzzer-chosen points, :class:`LogFilter` (``text`` mode) returns text in which every ESC
starts an allowed CSI (SGR, cursor motion, erase; no private marker, no number over the
cap, no scrollback erase), no other C0/C1 control or DEL is left, the output is the same
however the input was cut, its length is bounded by four characters per input byte, and
the filter never holds more than one CSI's worth of characters. :class:`TerminalFilter`
in ``pty`` mode returns a subsequence of the input bytes, the same however it was cut, in
which every ESC starts one whole sequence that is not a query (checked against an
independent statement of the rules below), no ENQ and no C1 control is left, and it never
holds more than one OSC's worth. :class:`ModeTracker` never raises and ends in the same
modes however the input was cut. Run::

    python fuzz/terminal_filter.py -atheris_runs=1000000 fuzz/terminal_corpus   # atheris
    python fuzz/terminal_filter.py --replay [--seconds S]                        # without
"""

import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from policy_common import mutate

try:
    import atheris  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - replay mode works without it
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["glove"]):
        from glove.session._escape import (
            MAX_CSI_CHARS,
            MAX_STRING_CHARS,
            LogFilter,
            ModeTracker,
            TerminalFilter,
        )
else:
    from glove.session._escape import (
        MAX_CSI_CHARS,
        MAX_STRING_CHARS,
        LogFilter,
        ModeTracker,
        TerminalFilter,
    )

CORPUS = Path(__file__).resolve().parent / "terminal_corpus"
DEFAULT_REPLAY_SECONDS = 10.0
#: An allowed CSI as the filter may emit it (an independent statement of the allowlist).
SAFE_CSI = re.compile(r"\x1b\[[0-9;:]*[mABCDEFGHJKSTfdLMPX@]")
CONTROL = re.compile(r"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]")
NUMBER = re.compile(r"[0-9]+")
#: ``pty`` mode, independently: what may follow an ESC in the output, whole.
PTY_CSI = re.compile(r"\x1b\[([<=>?]?)([0-9;:]*)([ -/]*)([@-~])")
PTY_OSC = re.compile(r"\x1b\]([0-9]+)((?:;[^\x00-\x1f\x7f-\x9f\udc80-\udc9f]*)?)(?:\x07|\x1b\\)")
PTY_ESC = re.compile(r"\x1b[ -/]{0,4}[0-~]")
PTY_FORBIDDEN = re.compile("[\x05\x80-\x9f\udc80-\udc9f]")
#: (prefix, intermediates, final) of CSI queries; "*" matches any.
PTY_QUERIES = (
    ("*", "*", "c"), ("*", "*", "n"), (">", "*", "q"), ("*", "$", "p"), ("?", "*", "u"),
    ("*", "$", "u"), ("", "", "x"), ("*", "*", "y"), ("?", "*", "m"), ("*", "#", "R"),
)  # fmt: skip
PTY_OSC_OK = {0, 1, 2, 4, 7, 8, 9, 104, 133, *range(10, 20), *range(110, 120)}


def _check_safe(text: str) -> None:
    for match in SAFE_CSI.finditer(text):
        numbers = [int(n) for n in NUMBER.findall(match.group())]
        assert all(n <= 9999 for n in numbers), match.group()
        assert not (match.group().endswith("J") and 3 in numbers), match.group()
    stripped = SAFE_CSI.sub("", text)
    assert CONTROL.search(stripped) is None, repr(stripped[:120])


def _check_pty_safe(text: str) -> None:
    i = 0
    while True:
        at = text.find("\x1b", i)
        ground = text[i:] if at < 0 else text[i:at]
        assert PTY_FORBIDDEN.search(ground) is None, repr(ground[:120])
        if at < 0:
            return
        csi, osc = PTY_CSI.match(text, at), PTY_OSC.match(text, at)
        if csi is not None:
            prefix, params, inter, final = csi.groups()
            for want_prefix, want_inter, want_final in PTY_QUERIES:
                assert not (
                    final == want_final
                    and want_prefix in ("*", prefix)
                    and (want_inter == "*" or (want_inter in inter if want_inter else not inter))
                ), csi.group()
            assert final != "t" or params.split(";")[0] in ("22", "23"), csi.group()
            i = csi.end()
        elif osc is not None:
            number = int(osc.group(1))
            assert number in PTY_OSC_OK, osc.group()
            assert not (number in (4, 10, 11, 12) and "?" in osc.group(2)), osc.group()
            i = osc.end()
        else:
            esc = PTY_ESC.match(text, at)
            assert esc is not None, repr(text[at : at + 40])
            assert esc.group()[1] not in "[]PX^_Z\\", repr(esc.group())
            i = esc.end()


def _is_subsequence(small: bytes, big: bytes) -> bool:
    rest = iter(big)
    return all(byte in rest for byte in small)


def _check_pty(stream: bytes, step: int) -> None:
    whole = TerminalFilter("pty")
    expected = whole.feed(stream) + whole.close()
    _check_pty_safe(expected.decode("utf-8", "surrogateescape"))
    assert _is_subsequence(expected, stream)
    pieces = TerminalFilter("pty")
    parts = []
    for at in range(0, len(stream), step):
        parts.append(pieces.feed(stream[at : at + step]))
        assert pieces.held <= max(MAX_CSI_CHARS, MAX_STRING_CHARS)
    parts.append(pieces.close())
    assert b"".join(parts) == expected
    assert pieces.dropped == whole.dropped


def seeds() -> list[bytes]:
    """The seed corpus."""
    return [path.read_bytes() for path in sorted(CORPUS.iterdir())]


def one_input(data: bytes) -> None:
    """Check the contract on ``data`` (its first byte picks the chunk size)."""
    if not data:
        return
    step = data[0] % 23 + 1
    stream = data[1:]
    whole = LogFilter()
    expected = whole.feed(stream) + whole.close()
    _check_safe(expected)
    assert len(expected) <= 4 * len(stream) + 4
    pieces = LogFilter()
    parts = []
    for at in range(0, len(stream), step):
        parts.append(pieces.feed(stream[at : at + step]))
        assert len(pieces._filter._pending) <= MAX_CSI_CHARS
    parts.append(pieces.close())
    assert "".join(parts) == expected
    _check_pty(stream, step)
    tracker_whole = ModeTracker()
    tracker_whole.feed(stream)
    tracker_pieces = ModeTracker()
    for at in range(0, len(stream), step):
        tracker_pieces.feed(stream[at : at + step])
    assert tracker_pieces.modes == tracker_whole.modes
    tracker_whole.modes.restore()
    tracker_whole.modes.reset()


def _replay(seconds: float) -> int:
    corpus = seeds()
    for seed in corpus:
        for first in (0, 5, 22):
            one_input(bytes([first]) + seed)
    rng = random.Random(0)  # noqa: S311 - reproducible mutations, not cryptography
    deadline = time.monotonic() + seconds
    runs = 0
    while time.monotonic() < deadline:
        data = bytes([rng.randrange(256)]) + rng.choice(corpus)
        for _ in range(rng.randrange(1, 8)):
            data = mutate(data, rng)
        one_input(data)
        runs += 1
    return runs


if __name__ == "__main__":
    if "--replay" in sys.argv:
        seconds = DEFAULT_REPLAY_SECONDS
        if "--seconds" in sys.argv:
            seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
        runs = _replay(seconds)
        print(f"terminal_filter: {len(seeds())} seeds and {runs} mutations, no failure")
    elif atheris is None:
        print("atheris is not installed; use --replay", file=sys.stderr)
        raise SystemExit(2)
    else:
        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
