"""``--use DIR`` / ``use = [...]``: a host virtualenv or tool install made usable inside.

A virtualenv is not relocatable (its scripts' shebangs and ``bin/python`` name absolute
paths) and a Node.js or other tool install finds its files by absolute path too, so the
directory is bound **read-only at the same path** (under ``/tmp`` too, inside the sandbox's
private /tmp; never under ``/proc`` or ``/dev``, which the sandbox builds) and its ``bin/``
(or ``.bin/`` of a ``node_modules``) goes first on ``PATH``. A virtualenv also needs the
interpreter it was made from: ``pyvenv.cfg``'s ``home`` names that interpreter's ``bin/``,
whose prefix is bound at the path the venv's symlinks use (from its resolved location,
since bind sources never pass a symlink). ``VIRTUAL_ENV`` is set as ``activate`` would.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final, NamedTuple

from glove.container._spec import Bind, normalize_inside, sandbox_owned
from glove.container.errors import SpecError

#: Largest ``pyvenv.cfg`` read.
MAX_PYVENV_CFG_BYTES: Final = 64 * 1024
#: Directories under which the default profile already shows the host's files.
SYSTEM_PREFIXES: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib64")


class UseExpansion(NamedTuple):
    """What one ``--use DIR`` adds: binds, ``PATH`` entries (first) and variables."""

    binds: tuple[Bind, ...]
    path: tuple[str, ...]
    env: dict[str, str]


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def _venv_home(directory: Path) -> str | None:
    """The ``home`` of a virtualenv's ``pyvenv.cfg``, or None when DIR is no virtualenv."""
    cfg = directory / "pyvenv.cfg"
    try:
        with cfg.open("rb") as handle:
            text = handle.read(MAX_PYVENV_CFG_BYTES).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SpecError(f"--use {directory}: cannot read {cfg}: {exc.strerror}") from exc
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home":
            return value.strip()
    raise SpecError(f"--use {directory}: {cfg} names no 'home' (the base interpreter)")


def expand_use(raw: str, cwd: str) -> UseExpansion:
    """Expand one ``--use`` directory (relative to ``cwd``).

    Raises:
        SpecError: the directory does not exist, or its ``pyvenv.cfg`` is unusable.
    """
    directory = Path(os.path.normpath(Path(cwd, raw)))
    if not directory.is_dir():
        raise SpecError(f"--use {raw}: {directory} is not a directory")
    owned = sandbox_owned(str(directory))
    if owned is not None:
        raise SpecError(
            f"--use {raw}: {directory} is shown at its own path, which is the sandbox's own "
            f"{owned}; use a directory elsewhere (a path below /tmp works)"
        )
    real = os.path.realpath(directory)
    binds = [Bind(source=real, target=str(directory), mode="ro")]
    env: dict[str, str] = {}
    home = _venv_home(directory)
    if home is not None:
        env["VIRTUAL_ENV"] = str(directory)
        base = Path(home)
        prefix = base.parent if base.name == "bin" else base
        if not prefix.is_absolute():
            raise SpecError(f"--use {raw}: pyvenv.cfg's home {home!r} is not absolute")
        if not _under(normalize_inside(str(prefix)), SYSTEM_PREFIXES):
            binds.append(Bind(source=os.path.realpath(prefix), target=str(prefix), mode="ro"))
    path = [str(c) for c in (directory / "bin", directory / ".bin") if c.is_dir()]
    return UseExpansion(tuple(binds), tuple(path or [str(directory)]), env)
