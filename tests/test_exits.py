"""One exit-code table: ``glove.exits`` holds every code, one meaning per name, and nothing
else in the package defines one (the in-sandbox scripts spell the same values)."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

from glove import exits
from glove.egress import helper
from glove.mcp import relay, shim
from tests._ast import parse as parse_source

SRC = Path(exits.__file__).resolve().parent
DOCS_CLI = SRC.parents[1] / "docs" / "cli.md"
#: The standard-library scripts that run inside the sandbox and cannot import glove.exits.
IN_SANDBOX = {SRC / "mcp" / "shim.py", SRC / "egress" / "helper.py"}
#: Codes from here up mean one thing in every command (below, each command's own answers).
COMMON_FROM = 64


def _table() -> dict[str, int]:
    return {
        name: value
        for name, value in vars(exits).items()
        if name.startswith("EXIT_") and isinstance(value, int)
    }


def _documented_names() -> set[str]:
    """The EXIT_ names whose assignment is followed by a docstring in glove/exits.py."""
    body = parse_source(Path(exits.__file__).read_text()).body
    named = set()
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            named.add(node.target.id)
    return named


def test_every_code_has_a_docstring() -> None:
    """Each name in the table says what its code means, in a docstring of its own."""
    table = _table()
    assert table, "glove.exits defines no exit codes"
    assert set(table) <= _documented_names()


def test_a_common_code_has_one_name() -> None:
    """From 64 up (usage, unavailable, internal, deadline, the sandbox's, interrupted) no two
    names share a value: each such code means one thing in every command."""
    by_value: dict[int, list[str]] = {}
    for name, value in _table().items():
        if value >= COMMON_FROM:
            by_value.setdefault(value, []).append(name)
    assert {value: names for value, names in by_value.items() if len(names) > 1} == {}


def test_the_documented_codes_did_not_move() -> None:
    """The codes docs/cli.md names keep their values (decision 0040 lists the one change)."""
    table = _table()
    assert (table["EXIT_USAGE"], table["EXIT_UNAVAILABLE"], table["EXIT_INTERNAL"]) == (64, 69, 70)
    assert (table["EXIT_HOST_PART_FAILED"], table["EXIT_SETUP_FAILED"]) == (124, 125)
    assert (table["EXIT_NOT_EXECUTABLE"], table["EXIT_NOT_FOUND"]) == (126, 127)
    assert (table["EXIT_SIGNAL_BASE"], table["EXIT_INTERRUPTED"]) == (128, 130)
    assert table["EXIT_DEADLINE"] == 75  # session wait --timeout: 124 before decision 0040
    assert table["EXIT_GLOVED_REFUSED"] == 2  # the unit's RestartPreventExitStatus=2
    journal = [table[f"EXIT_JOURNAL_{n}"] for n in ("CORRUPT", "TAMPERED", "TRUNCATED", "OTHER")]
    assert journal == [1, 2, 3, 4]
    receipts = [
        table[f"EXIT_RECEIPT_{n}"]
        for n in ("SIGNATURE", "PROOF", "ENTRY", "MALFORMED", "UNREADABLE", "NOT_FOUND")
    ]
    assert receipts == [1, 3, 4, 5, 6, 7]
    assert table["EXIT_RECEIPTS_REFUSED"] == 11


def test_no_other_module_defines_an_exit_code() -> None:
    """No module of the package but glove.exits (and the in-sandbox scripts) assigns an
    ``EXIT_*`` integer: every command and library part takes its codes from the table."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == Path(exits.__file__).resolve() or path in IN_SANDBOX:
            continue
        for node in parse_source(path.read_text()).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            value = getattr(node, "value", None)
            for target in targets:
                if (
                    isinstance(target, ast.Name)
                    and re.fullmatch(r"EXIT_[A-Z_]+", target.id)
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, int)
                ):
                    found.append(f"{path.relative_to(SRC)}:{node.lineno} {target.id}")
    assert found == []


def test_the_in_sandbox_scripts_spell_the_same_codes() -> None:
    """glove-relay, glove-egress and glove-mcp exit with the table's values (the relay is the
    egress helper's MCP-only mode, still importable as ``glove.mcp.relay``)."""
    assert relay is helper
    for script in (relay, helper):
        assert script.EXIT_SETUP_FAILED == exits.EXIT_SETUP_FAILED
        assert script.EXIT_CANNOT_RUN == exits.EXIT_NOT_FOUND
        assert script.SIGNAL_EXIT_BASE == exits.EXIT_SIGNAL_BASE
    assert helper.EXIT_REFUSED == 1  # glove-egress connect's own "no"
    assert shim.EXIT_NO_MEDIATOR == exits.EXIT_UNAVAILABLE


def test_docs_cli_lists_every_code() -> None:
    """docs/cli.md's table has a row for every value in the table."""
    rows = {
        cell.strip("* ")
        for line in DOCS_CLI.read_text().splitlines()
        if line.startswith("| ")
        for cell in [line.split("|")[1].strip()]
    }
    listed: set[int] = set()
    for row in rows:
        for part in re.split(r"[,\s]+", row):
            if part.isdigit():
                listed.add(int(part))
            elif re.fullmatch(r"\d+-\d+", part):
                low, high = map(int, part.split("-"))
                listed.update(range(low, high + 1))
            elif part == "128+N":
                listed.add(exits.EXIT_SIGNAL_BASE)
    assert set(_table().values()) - listed == set()
