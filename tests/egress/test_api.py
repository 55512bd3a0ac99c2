"""The package's contract: exports, the error tree, sans-IO cores, a stdlib-only helper."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import glove.egress
from glove.egress import errors
from glove.errors import GloveError
from tests._ast import parse as parse_source

PACKAGE = Path(glove.egress.__file__).parent
#: Modules that must stay pure: bytes and values in, values out.
PURE = (
    "_rules",
    "_addresses",
    "_http",
    "_rewrite",
    "_socks5",
    "_tls",
    "_dns",
    "_check",
    "_listeners",
)
FORBIDDEN_IN_PURE = {"asyncio", "os", "socket", "selectors", "subprocess", "threading"}


def _imports(path: Path) -> set[str]:
    tree = parse_source(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module if node.module.startswith("glove") else node.module.split(".")[0])
    return names


def _order(name: str) -> tuple[int, str]:
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_and_every_name_exists() -> None:
    """``__all__`` is sorted (constants, classes, functions) and every name is importable."""
    names = glove.egress.__all__
    assert names == sorted(names, key=_order)
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(glove.egress, name), name


def test_every_error_roots_at_glove_error_and_is_in_the_tree() -> None:
    """Each error class derives from EgressError and GloveError and is named in the docstring."""
    doc = errors.__doc__ or ""
    classes = [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if obj.__module__ == errors.__name__
    ]
    assert len(classes) == 11
    for cls in classes:
        assert issubclass(cls, GloveError)
        assert issubclass(cls, errors.EgressError)
        assert cls.__name__ in doc, cls.__name__
    assert "egress.errors.EgressError" in (Path(inspect.getfile(GloveError)).read_text())


def test_pure_cores_import_no_io() -> None:
    """The rules, address classes and codecs import no asyncio, os or socket (sans-IO)."""
    for module in PURE:
        imported = _imports(PACKAGE / f"{module}.py")
        assert not imported & FORBIDDEN_IN_PURE, (module, imported & FORBIDDEN_IN_PURE)
        # Only other pure modules, msgspec and the standard library's pure parts.
        for name in imported:
            if name.startswith("glove"):
                target = name.rsplit(".", 1)[-1]
                assert target in (*PURE, "errors"), (module, name)


def test_the_helper_imports_only_the_standard_library() -> None:
    """glove-egress runs on the sandbox's system Python: nothing from Glove or PyPI."""
    imported = _imports(PACKAGE / "helper.py")
    assert not any(name.startswith("glove") for name in imported)
    allowed = {
        "__future__",
        "contextlib",
        "os",
        "selectors",
        "signal",
        "socket",
        "sys",
        "time",
        "types",
        "ipaddress",
    }
    assert imported <= allowed, imported - allowed


def test_the_helper_copy_of_the_listeners_matches() -> None:
    """The helper's own constants equal the package's (it cannot import them)."""
    from glove.egress import _listeners, helper

    for name in dir(_listeners):
        if name.isupper():
            assert getattr(helper, name) == getattr(_listeners, name), name


def test_every_test_has_a_docstring() -> None:
    """One sentence on every test in this directory."""
    for path in Path(__file__).parent.glob("test_*.py"):
        tree = parse_source(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
                "test_"
            ):
                assert ast.get_docstring(node), f"{path.name}::{node.name}"
