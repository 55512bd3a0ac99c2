"""Fuzz target: transcript bytes -> ``glove session log``'s safe text, and the mode tracker.

Contract under test (``glove.session._escape``): for any bytes, cut into chunks at
fuzzer-chosen points, :class:`LogFilter` returns text in which every ESC starts an allowed
CSI (SGR, cursor motion, erase; no private marker, no number over the cap, no scrollback
erase), no other C0/C1 control or DEL is left, the output is the same however the input
was cut, its length is bounded by four characters per input byte, and the filter never
holds more than one CSI's worth of characters. :class:`ModeTracker` never raises and ends
in the same modes however the input was cut. Run::

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
        from glove.session._escape import MAX_CSI_CHARS, LogFilter, ModeTracker
else:
    from glove.session._escape import MAX_CSI_CHARS, LogFilter, ModeTracker

CORPUS = Path(__file__).resolve().parent / "terminal_corpus"
DEFAULT_REPLAY_SECONDS = 10.0
#: An allowed CSI as the filter may emit it (an independent statement of the allowlist).
SAFE_CSI = re.compile(r"\x1b\[[0-9;:]*[mABCDEFGHJKSTfdLMPX@]")
CONTROL = re.compile(r"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]")
NUMBER = re.compile(r"[0-9]+")


def _check_safe(text: str) -> None:
    for match in SAFE_CSI.finditer(text):
        numbers = [int(n) for n in NUMBER.findall(match.group())]
        assert all(n <= 9999 for n in numbers), match.group()
        assert not (match.group().endswith("J") and 3 in numbers), match.group()
    stripped = SAFE_CSI.sub("", text)
    assert CONTROL.search(stripped) is None, repr(stripped[:120])


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
