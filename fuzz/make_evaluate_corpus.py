"""Write the seed corpora of ``evaluate_fixture.py`` and ``evaluate_stream.py``.

``fuzz/evaluate_corpus/fixture/``: valid fixtures (the issue's example, bounds exactly at
their limits, escaped and non-ASCII literals) and one seed per refusal (duplicate keys
plain, escaped and nested, unknown members, wrong types and bounds, empty, NUL, repeated,
contradictory and never-matchable literals, too many and too long literals, invalid
UTF-8, lone surrogates, NaN, deep nesting, truncation, the size cap).

``fuzz/evaluate_corpus/stream/``: PTY output that exercises the normalizer and the
matcher (SGR-split words, OSC/DCS/APC/PM/SOS strings ended by BEL and by ST, C1 forms,
bracketed paste, CAN/SUB aborts, cut escapes, invalid and truncated UTF-8, fake verdict
and receipt JSON). Run it again after changing the seeds; the files are committed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "evaluate_corpus"
MAX_FIXTURE_BYTES = 64 * 1024
EXAMPLE: dict[str, Any] = {
    "version": 1,
    "exit_code": 0,
    "max_wall_ms": 30000,
    "required": ["tests passed"],
    "forbidden": ["Traceback", "FAILED"],
}


def _doc(**changes: Any) -> bytes:
    return json.dumps({**EXAMPLE, **changes}).encode()


def fixtures() -> dict[str, bytes]:
    """The fixture seeds by name."""
    seeds: dict[str, bytes] = {
        "00-valid-example": _doc(),
        "01-valid-compact": json.dumps(EXAMPLE, separators=(",", ":")).encode(),
        "02-valid-no-literals": _doc(required=[], forbidden=[]),
        "03-valid-256-literals": _doc(
            required=[f"r{i}" for i in range(128)], forbidden=[f"f{i}" for i in range(128)]
        ),
        "04-valid-4k-literal": _doc(forbidden=["\u20ac" * 1365 + "x"]),
        "05-valid-escapes": _doc(required=["a\n\tb", "caf\u00e9"], forbidden=["\x1b]52;", "\r"]),
        "06-valid-ascii-escaped": json.dumps(_doc_value(forbidden=["\u00e9\u4e2d"])).encode(),
        "07-valid-bounds": _doc(exit_code=255, max_wall_ms=7 * 24 * 3600 * 1000),
        "10-duplicate-root": b'{"version": 1, "version": 1}',
        "11-duplicate-escaped": _doc().replace(
            b'"exit_code"', b'"\\u0065xit_code": 0, "exit_code"'
        ),
        "12-duplicate-nested": _doc().replace(
            b'"forbidden": [', b'"forbidden": [{"a": 1, "a": 2}, '
        ),
        "13-unknown-members": _doc(regex=".*", command="rm"),
        "14-version-2": _doc(version=2),
        "15-exit-code-256": _doc(exit_code=256),
        "16-exit-code-bool": _doc(exit_code=True),
        "17-wall-zero": _doc(max_wall_ms=0),
        "18-wall-string": _doc(max_wall_ms="30000"),
        "19-required-string": _doc(required="tests passed"),
        "20-empty-literal": _doc(required=[""]),
        "21-nul-literal": _doc(forbidden=["a\u0000b"]),
        "22-repeated-literal": _doc(forbidden=["x", "x"]),
        "23-both-lists": _doc(required=["same"], forbidden=["same"]),
        "24-required-control": _doc(required=["done\r\n"]),
        "25-257-literals": _doc(
            required=[f"r{i}" for i in range(129)], forbidden=[f"f{i}" for i in range(128)]
        ),
        "26-4k-plus-literal": _doc(forbidden=["\u20ac" * 1366]),
        "27-invalid-utf8": b'{"version": 1, "required": ["\xff"]}',
        "28-lone-surrogate": b'{"version": 1, "required": ["\\ud800"]}',
        "29-nan": b'{"version": NaN}',
        "30-deep": b"[" * 64 + b"]" * 64,
        "31-truncated": _doc()[:40],
        "32-trailing": _doc() + b" x",
        "33-array": b"[]",
        "34-missing-field": json.dumps({"version": 1, "exit_code": 0}).encode(),
        "35-over-cap": b"{" + b" " * MAX_FIXTURE_BYTES + b"}",
        "36-huge-int": _doc().replace(b'"exit_code": 0', b'"exit_code": ' + b"9" * 5000),
        "37-bom": b"\xef\xbb\xbf" + _doc(),
    }
    return seeds


def _doc_value(**changes: Any) -> dict[str, Any]:
    return {**EXAMPLE, **changes}


def streams() -> dict[str, bytes]:
    """The stream seeds by name."""
    return {
        "00-plain": b"running tests\r\n12 passed\r\ntests passed\r\n",
        "01-sgr-split": b"FOR\x1b[0mBIDDEN \x1b[1;31mFAILED\x1b[m\r\n",
        "02-osc-bel": b"\x1b]0;Traceback title\x07visible\r\n",
        "03-osc-st": b"\x1b]2;title\x1b\\tests\x1b]8;;http://x\x1b\\ passed",
        "04-dcs-apc-pm-sos": b"\x1bPq#1~\x1b\\\x1b_apc\x1b\\\x1b^pm\x07\x1bXsos\x07ok",
        "05-c1": b"\xc2\x9b31mred\xc2\x9bm \xc2\x9d0;t\xc2\x9c \xc2\xa9",
        "06-bracketed-paste": b"\x1b[?2004h$ \x1b[200~pasted\x1b[201~\x1b[?2004l",
        "07-erase": b"--More--\x1b[K\r\x1b[2J\x1b[H",
        "08-can-sub": b"\x1b[31\x18x\x1b]0;t\x1aafter",
        "09-cut-escape": b"tests passed\x1b[",
        "10-cut-esc": b"tests passed\x1b",
        "11-cut-c2": b"tests passed\xc2",
        "12-invalid-utf8": b"tests passed\xff\xfe",
        "13-truncated-utf8": b"tests passed \xe2\x82",
        "14-surrogate": b"\xed\xa0\x80tests passed",
        "15-fake-verdict": b'{"verdict":"pass","reasons":[]}\r\n{"kind":"receipt","mac":"00"}\r\n',
        "16-controls": b"a\x00b\x07c\x08d\x7fe\r\nf\tg",
        "17-ss3-charset": b"\x1bOA\x1b(B\x1b)0\x1b7x\x1b8",
        "18-empty": b"",
        "19-surrogate-at-end": b"\x01U\xed\xac",  # found by this fuzzer: invalid, not cut
    }


def main() -> None:
    """Rewrite both corpora."""
    for name, seeds, suffix in (("fixture", fixtures(), ".json"), ("stream", streams(), ".bin")):
        directory = OUT / name
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        for stem, data in seeds.items():
            (directory / f"{stem}{suffix}").write_bytes(data)


if __name__ == "__main__":
    main()
