"""Generate the blocking client's typed calls from the asyncio client's (httpcore's unasync).

    .venv/bin/python scripts/unasync.py           # write src/glove/control/_sync_methods.py
    .venv/bin/python scripts/unasync.py --check   # exit 1 if it differs from what it would write

The rules are token replacements, applied to whole words so that no identifier is changed
by accident: ``async def`` -> ``def``, ``await `` dropped, ``AsyncMethods`` ->
``SyncMethods``, ``AsyncStream`` (of ``_async_client``) -> ``SyncStream`` (of ``_client``);
the module docstring is replaced by one that says the file is generated, and the result is
formatted by ruff as the source is. ``tests/control/test_unasync.py`` runs ``--check``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
#: (source, generated), relative to the repository.
FILES: Final = (("src/glove/control/_async_methods.py", "src/glove/control/_sync_methods.py"),)
#: Whole-word replacements, in order.
RULES: Final = (
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"\bAsyncMethods\b", "SyncMethods"),
    (r"\bAsyncStream\b", "SyncStream"),
    (r"\bglove\.control\._async_client\b", "glove.control._client"),
)
#: The generated module's docstring, in place of the source's.
DOCSTRING: Final = (
    '"""Generated from ``{source}`` by ``scripts/unasync.py``: do not edit.\n\n'
    "Edit the source and run ``.venv/bin/python scripts/unasync.py``;\n"
    "``tests/control/test_unasync.py`` fails while this file differs from what it writes.\n"
    '"""\n'
)
_MODULE_DOCSTRING: Final = re.compile(r'\A""".*?"""\n', re.DOTALL)


def unasync(text: str, source: str, generated: str) -> str:
    """The blocking version of ``text`` (the module at ``source``), formatted as ruff
    formats ``generated``."""
    text = _MODULE_DOCSTRING.sub(
        lambda _m: DOCSTRING.format(source=source.rsplit("/", 1)[-1]), text
    )
    for pattern, replacement in RULES:
        text = re.sub(pattern, replacement, text)
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", generated, "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout


def main() -> int:
    """Write (or ``--check``) every generated file; the exit code says whether all match."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare, write nothing")
    args = parser.parse_args()
    stale = []
    for source, generated in FILES:
        want = unasync((ROOT / source).read_text(encoding="utf-8"), source, generated)
        target = ROOT / generated
        have = target.read_text(encoding="utf-8") if target.exists() else None
        if have == want:
            continue
        stale.append(generated)
        if not args.check:
            target.write_text(want, encoding="utf-8")
    if args.check and stale:
        print(f"stale: {', '.join(stale)}; run scripts/unasync.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
