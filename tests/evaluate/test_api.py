"""The public surface of glove.evaluate, its error tree, and the purity of every module."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import glove.evaluate
import glove.evaluate.errors
from glove.errors import GloveError
from tests._ast import parse as parse_source

PACKAGE_DIR = Path(glove.evaluate.__file__).parent
FORBIDDEN_IMPORTS = {
    "asyncio",
    "os",
    "socket",
    "subprocess",
    "pathlib",
    "io",
    "threading",
    "time",
    "selectors",
    "shutil",
}


def test_all_is_sorted_as_ruff_sorts_it_and_every_name_is_documented() -> None:
    """Constants first, then classes, then functions; each public callable has a docstring."""
    names = glove.evaluate.__all__
    constants = [name for name in names if name.isupper()]
    assert names[: len(constants)] == sorted(constants)
    others = names[len(constants) :]
    assert others == sorted(others, key=lambda name: (name[0].islower(), name))
    for name in names:
        value = getattr(glove.evaluate, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), name


def test_every_module_is_sans_io_and_imports_no_other_glove_package() -> None:
    """No asyncio, os, files, threads or clocks; from glove, only glove.errors."""
    checked = 0
    for module in sorted(PACKAGE_DIR.glob("*.py")):
        tree = parse_source(module.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN_IMPORTS, f"{module.name} imports {name}"
                if name.startswith("glove."):
                    assert name == "glove.errors" or name.startswith("glove.evaluate"), (
                        f"{module.name} imports {name}"
                    )
        checked += 1
    assert checked == 14  # __init__, errors and twelve _private modules


def test_the_c_scanner_is_sans_io_too() -> None:
    """_cscan.c includes only Python.h and C99 headers and calls nothing that does I/O."""
    source = (PACKAGE_DIR / "_cscan.c").read_text()
    includes = re.findall(r"^#include\s+(\S+)", source, flags=re.MULTILINE)
    assert includes == ["<Python.h>", "<stdint.h>", "<stdlib.h>", "<string.h>"]
    for call in ("open(", "read(", "write(", "fopen", "printf", "getenv", "time(", "pthread"):
        assert call not in source, call


def test_every_error_roots_at_glove_error_and_is_in_the_tree() -> None:
    """Each error class derives from GloveError and ValueError where said, with a code."""
    doc = glove.evaluate.errors.__doc__ or ""
    classes = [
        value
        for value in vars(glove.evaluate.errors).values()
        if isinstance(value, type)
        and issubclass(value, Exception)
        and value.__module__ == "glove.evaluate.errors"
    ]
    assert {cls.__name__ for cls in classes} == {
        "EvaluateError",
        "FixtureError",
        "EvidenceError",
        "StatsError",
    }
    for cls in classes:
        assert issubclass(cls, GloveError)
        assert cls.__name__ in doc
        assert isinstance(cls.code, str)  # type: ignore[attr-defined]
    for cls in (
        glove.evaluate.FixtureError,
        glove.evaluate.EvidenceError,
        glove.evaluate.StatsError,
    ):
        assert issubclass(cls, glove.evaluate.EvaluateError)
        assert issubclass(cls, ValueError)


def test_the_bounds_are_the_issues() -> None:
    """64 KiB fixtures, 256 literals of 4 KiB, version 1."""
    assert glove.evaluate.MAX_FIXTURE_BYTES == 64 * 1024
    assert glove.evaluate.MAX_LITERALS == 256
    assert glove.evaluate.MAX_LITERAL_BYTES == 4 * 1024
    assert glove.evaluate.FIXTURE_VERSION == 1
