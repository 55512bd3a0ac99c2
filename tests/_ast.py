"""``ast.parse`` for the tests that read Glove's own source.

CPython 3.11 (Debian's 3.11.2 here) now and then raises ``SystemError: AST constructor
recursion depth mismatch`` from a correct parse late in a long run (cpython gh-106905: the
constructor's depth counter is shared and not restored on every path). The source is fine
and a second parse succeeds, so a parse is tried again on exactly that error.
"""

from __future__ import annotations

import ast

#: Parses tried before the error is let through.
ATTEMPTS = 3


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``, tried again on CPython's spurious depth-mismatch error."""
    for attempt in range(ATTEMPTS):
        try:
            return ast.parse(source)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
