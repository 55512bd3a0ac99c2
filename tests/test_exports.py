"""Every package's ``__init__`` is its API (trio's ``test_exports.py`` is the model): its
``__all__`` is sorted, names only what exists, and holds every name other packages use."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import glove
from tests._ast import parse as parse_source

SRC = Path(glove.__file__).resolve().parent
#: Every package of the tree, subpackages included (``glove.container.linux``).
PACKAGES = sorted(
    ".".join(("glove", *path.parent.relative_to(SRC).parts))
    for path in SRC.rglob("__init__.py")
    if "__pycache__" not in path.parts
)


def _sort_key(name: str) -> tuple[int, str]:
    """ruff's ``__all__`` order (RUF022, isort-style): CONSTANTS, then Classes, then the rest."""
    if name.isupper() or name.lstrip("_").replace("_", "").isdigit():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def _module_of(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(module: str) -> str:
    """The innermost package a module belongs to (itself, for a package)."""
    candidate = module
    while candidate not in PACKAGES:
        candidate = candidate.rpartition(".")[0]
    return candidate


def _imports_across_packages() -> Iterator[tuple[str, str, str]]:
    """``(importer, package, name)`` for each ``from glove.X import name`` whose importer is
    not inside package ``glove.X`` (function-level imports and TYPE_CHECKING ones included)."""
    for path in sorted(SRC.rglob("*.py")):
        importer = _module_of(path)
        for node in ast.walk(parse_source(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or node.module not in PACKAGES:
                continue
            target = node.module
            if importer == target or importer.startswith(target + "."):
                continue
            for alias in node.names:
                yield importer, target, alias.name


def test_every_package_is_found() -> None:
    """The walk sees the packages this test is about (a moved tree would make it vacuous)."""
    assert {"glove", "glove.cli", "glove.config", "glove.daemon", "glove.session"} <= set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_sorted_and_every_name_exists(package: str) -> None:
    """``__all__`` is in ruff's order, has no duplicate, and each name resolves (lazy ones
    included: each is imported here)."""
    module = importlib.import_module(package)
    names = list(module.__all__)
    assert names == sorted(names, key=_sort_key)
    assert len(names) == len(set(names))
    missing = [name for name in names if not hasattr(module, name)]
    assert missing == []


def test_every_name_another_package_imports_is_exported() -> None:
    """A name taken from another package comes through that package's ``__all__`` (or is a
    public submodule of it), never from around it."""
    exports = {package: set(importlib.import_module(package).__all__) for package in PACKAGES}
    hidden = sorted(
        f"{importer} imports {name} from {package}"
        for importer, package, name in _imports_across_packages()
        if name not in exports[package]
        and not (SRC / Path(*package.split(".")[1:]) / f"{name}.py").exists()
    )
    assert hidden == []


def test_a_lazy_name_resolves_to_what_its_module_defines() -> None:
    """A name a package exports lazily (PEP 562) is the very object of its private module."""
    from glove.container.linux import get_winsize
    from glove.container.linux._pty import get_winsize as direct

    assert get_winsize is direct


def _lazy_table(package: str) -> dict[str, tuple[str, str]]:
    """``{name: (module, attribute)}`` of a package's PEP 562 table (``_LAZY``), if any."""
    table = getattr(importlib.import_module(package), "_LAZY", {})
    return {
        name: (entry, name) if isinstance(entry, str) else tuple(entry)
        for name, entry in table.items()
    }


@pytest.mark.parametrize("package", [p for p in PACKAGES if _lazy_table(p)])
def test_every_lazy_name_is_exported_and_resolves(package: str) -> None:
    """Each name of a package's lazy table is in its ``__all__`` and, looked up in a fresh
    interpreter, is the object its module defines: an entry naming the wrong module, or a
    name dropped from the table, fails here."""
    table = _lazy_table(package)
    exported = set(importlib.import_module(package).__all__)
    assert set(table) <= exported
    code = (
        "import importlib, json, sys\n"
        f"package = importlib.import_module({package!r})\n"
        f"table = {table!r}\n"
        "wrong = [name for name, (module, attr) in table.items() if getattr(package, name)\n"
        "         is not getattr(importlib.import_module(module), attr)]\n"
        "print(json.dumps(wrong))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
