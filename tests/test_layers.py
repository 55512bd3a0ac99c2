"""The import contracts bite: on a copy of the tree, one upward import (inside a function) or
one import of another package's private module makes ``lint-imports`` fail, naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import glove

SRC = Path(glove.__file__).resolve().parent
ROOT = SRC.parents[1]
#: lint-imports itself, as the console script runs it (its config is ./pyproject.toml).
LINT = (
    "import sys; from importlinter.cli import lint_imports_command; "
    "sys.exit(lint_imports_command())"
)
LINT_TIMEOUT_S = 120


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of ``src/glove`` and ``pyproject.toml`` that lint-imports can be run on."""
    shutil.copytree(SRC, tmp_path / "src" / "glove", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    # The copy comes first on the path, before the editable install of the real tree.
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=LINT_TIMEOUT_S,
    )


def _append(tree: Path, module: str, code: str) -> None:
    path = tree / "src" / Path(*module.split(".")).with_suffix(".py")
    path.write_text(path.read_text() + "\n\n" + code)


def test_the_tree_as_it_is_keeps_both_contracts(tree: Path) -> None:
    """The unchanged copy passes: what fails below fails because of the one added import."""
    done = _lint(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kept, 0 broken" in done.stdout


def test_an_upward_import_inside_a_function_breaks_the_layers(tree: Path) -> None:
    """The journal (layer 1) reaching up into the session (layer 3), deferred into a function
    as the old code did, is refused and named."""
    _append(
        tree,
        "glove.journal._codec",
        "def _probe() -> object:\n    from glove.session import SessionOutcome\n\n"
        "    return SessionOutcome\n",
    )
    done = _lint(tree)
    assert done.returncode != 0
    assert "layers: a package imports only from the layers below it" in done.stdout
    assert "glove.journal._codec -> glove.session" in done.stdout
    assert "1 broken" in done.stdout  # the private-modules contract still holds


def test_an_import_of_another_packages_private_module_is_refused(tree: Path) -> None:
    """The plan (above the journal, so no layer is broken) importing the journal's private
    ``_storage`` instead of ``glove.journal`` is refused and named."""
    _append(
        tree,
        "glove.plan._model",
        "def _probe() -> object:\n    from glove.journal._storage import PosixStorage\n\n"
        "    return PosixStorage\n",
    )
    done = _lint(tree)
    assert done.returncode != 0
    assert "Private modules may only be imported from within their parent package" in done.stdout
    assert "glove.plan._model -> glove.journal._storage" in done.stdout
    assert "1 broken" in done.stdout


def test_a_new_package_must_be_given_a_layer(tree: Path) -> None:
    """A package no layer names is refused (the layers contract is exhaustive)."""
    (tree / "src" / "glove" / "newthing").mkdir()
    (tree / "src" / "glove" / "newthing" / "__init__.py").write_text('"""New."""\n')
    done = _lint(tree)
    assert done.returncode != 0
    assert "newthing" in done.stdout + done.stderr
