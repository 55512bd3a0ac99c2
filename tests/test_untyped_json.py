"""``dict[str, Any]`` cannot spread unseen: each module of ``src/glove`` holds at most the
count its allowlist entry gives, and every entry says why the JSON there stays untyped.

Glove's own shapes are msgspec Structs (decoded strictly where they are read), TypedDicts or
precise types. What stays is JSON that is free-form on purpose at a boundary: MCP's JSON-RPC
payloads (under the one alias ``glove.mcp._messages.McpObject``), ``glove.protocol.JsonObject``,
the strict decoders that read a raw object to refuse it precisely, and documents Glove edits
but does not own. docs/architecture.md ("Where JSON stays untyped") lists them. A count is a
maximum: lowering one passes; the entry is then lowered or removed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import glove
from tests._ast import parse as parse_source

SRC = Path(glove.__file__).resolve().parent

#: Module (relative to ``src/glove``) -> (most ``dict[str, Any]`` it may hold, why).
ALLOWED: dict[str, tuple[int, str]] = {
    "agents/_configs.py": (8, "Claude Code's and Codex's settings: documents Glove edits"),
    "agents/_prepare.py": (3, "the same documents, read from and written to the agent home"),
    "agents/_toml.py": (2, "the TOML writer of those documents: any table"),
    "cli/_eval.py": (1, "BundleJson: an A/B bundle's files as a third party hands them over"),
    "cli/_policy.py": (1, "a policy file's tool list: a document Glove reads but does not own"),
    "cli/_receipts.py": (1, "a verified receipt, printed as it was signed"),
    "container/_profile.py": (6, "profile TOML tables, merged before their strict decode"),
    "evaluate/_json.py": (3, "the strict decoder itself: it reads the raw object to refuse it"),
    "journal/_bundle.py": (3, "a bundle's receipt: any signed payload ever exported, as it is"),
    "mcp/_messages.py": (1, "McpObject itself: MCP's JSON-RPC boundary, under one name"),
    "protocol/_json.py": (3, "JsonObject itself, and the strict parser's object hook"),
    "protocol/control.py": (2, "the strict frame decoder: it reads the raw object to refuse it"),
    "testing/control.py": (4, "the fake client's raw frames (it sends malformed ones on purpose)"),
    "wallet/_pi.py": (2, "the tool's JSON Schema and the result's details, as Pi reads them"),
}


def _is_untyped(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
        return False
    if node.value.id not in {"dict", "Dict"} or not isinstance(node.slice, ast.Tuple):
        return False
    names = [e.id if isinstance(e, ast.Name) else None for e in node.slice.elts]
    return names == ["str", "Any"]


def count(source: str) -> int:
    """How many ``dict[str, Any]`` the module source holds (annotations, aliases, quoted
    annotations included; comments and docstrings not)."""
    found = 0
    for node in ast.walk(parse_source(source)):
        if _is_untyped(node):
            found += 1
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "dict[" in node.value.lower()
        ):
            try:
                quoted = ast.parse(node.value, mode="eval")
            except (SyntaxError, ValueError):
                continue
            found += sum(1 for inner in ast.walk(quoted) if _is_untyped(inner))
    return found


def _counts() -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in sorted(SRC.rglob("*.py")):
        found = count(path.read_text())
        if found:
            counts[path.relative_to(SRC).as_posix()] = found
    return counts


def test_no_module_holds_more_untyped_json_than_it_is_allowed() -> None:
    over = {
        rel: (found, ALLOWED.get(rel, (0, ""))[0])
        for rel, found in _counts().items()
        if found > ALLOWED.get(rel, (0, ""))[0]
    }
    assert over == {}, "type Glove's own shapes; (found, allowed) per module: " + repr(over)


def test_each_entry_names_a_module_that_still_needs_it_and_says_why() -> None:
    counts = _counts()
    stale = [rel for rel in ALLOWED if rel not in counts]
    assert stale == [], "remove the entries of modules that hold none any more"
    assert all(reason for _, reason in ALLOWED.values())


def test_the_count_sees_each_spelling() -> None:
    source = (
        "from typing import Any, Dict\n"
        "A = dict[str, Any]\n"
        "def f(x: 'dict[str, Any]') -> Dict[str, Any]: ...\n"
        "def g(x: dict[str, object], y: dict[int, Any]) -> None:\n"
        "    '''dict[str, Any] in a docstring is prose'''\n"
        "# dict[str, Any] in a comment too\n"
    )
    assert count(source) == 3
