"""The public surface of glove.policy and the sans-IO rule for its core modules."""

import ast
from pathlib import Path

import glove.policy
from tests._ast import parse as parse_source

POLICY_DIR = Path(glove.policy.__file__).parent
# The file adapter and the command line shell are the only modules that do I/O.
IO_ADAPTERS = {"_load.py", "cli.py"}
FORBIDDEN_IMPORTS = {"asyncio", "os", "socket", "subprocess", "pathlib", "io", "threading", "time"}


def test_public_names_are_pinned_and_sorted() -> None:
    """``__all__`` is the documented contract, sorted."""
    assert glove.policy.__all__ == [
        "ALLOW_ALL",
        "ALLOW_ALL_TEXT",
        "Decision",
        "LintWarning",
        "Policy",
        "PolicyError",
        "PolicyFileError",
        "ToolDefinition",
        "allow_all_policy",
        "canonical_json",
        "definition_digests",
        "full_definition_digest",
        "lint_policy",
        "load_policy",
        "parse_policy",
    ]
    assert sorted(glove.policy.__all__) == glove.policy.__all__
    for name in glove.policy.__all__:
        assert getattr(glove.policy, name).__doc__


def test_core_modules_import_no_io() -> None:
    """Every module but the file adapter is sans-IO: no asyncio, os, socket, files or clocks."""
    checked = 0
    for module in sorted(POLICY_DIR.glob("*.py")):
        if module.name in IO_ADAPTERS:
            continue
        tree = parse_source(module.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN_IMPORTS, f"{module.name} imports {name}"
        checked += 1
    assert checked >= 10
