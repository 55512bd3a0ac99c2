"""PEP 562 lazy exports, shared by the packages whose ``__init__`` names more than a
command should import.

A package lists each public name with the private module that defines it and sets
``__getattr__ = lazy_exports(__name__, TABLE)``: the first access imports that module and
keeps the value in the package's namespace, so later accesses never come back here. Names
for mypy stay under ``TYPE_CHECKING`` and ``__all__`` is unchanged (tests/test_exports.py
checks every table against it).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name of ``table`` from its module."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
