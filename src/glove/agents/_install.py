"""Finding an agent's install on the host, and what to bind so it runs inside.

An npm-installed agent is an executable on ``PATH`` (``node_modules/.bin/claude``, or
``/usr/local/bin/codex`` after ``npm install -g``) that is a symlink into its package
(``node_modules/@anthropic-ai/claude-code/bin/claude.exe``). Binding the link would recreate
a relative link that points nowhere inside, so Glove resolves it, finds the package
directory (the nearest ancestor whose ``package.json`` names one of the profile's
``packages``) and binds, read-only at the same paths, that package and its siblings of the
same name prefix (the platform packages that hold the native binaries, such as
``@openai/codex-linux-x64``). The command inside is the resolved executable.

``--agent-install DIR`` names the install instead of ``PATH``: a directory whose ``bin/``,
``node_modules/.bin/`` or ``.bin/`` holds the command (an ``npm install --prefix DIR``, a
global prefix, or a ``node_modules`` directory).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Final, NamedTuple

from glove.agents.errors import AgentInstallError

#: Largest package.json read while looking for the package directory.
MAX_PACKAGE_JSON_BYTES: Final = 1024 * 1024
#: Directories of an install that may hold the command.
COMMAND_DIRS: Final = ("bin", "node_modules/.bin", ".bin")
#: Host prefixes the default profile already shows read-only.
SYSTEM_PREFIXES: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib64")


class Install(NamedTuple):
    """An agent's install as found on the host.

    Attributes:
        executable: the resolved executable (its path inside too).
        package_dirs: the package directories to bind read-only at the same path.
        runtime_bin: the ``bin/`` of a Node.js outside the system directories (bound and put
            first on ``PATH``), or None.
    """

    executable: str
    package_dirs: tuple[str, ...]
    runtime_bin: str | None


def _package_name(directory: Path) -> str | None:
    try:
        with (directory / "package.json").open("rb") as handle:
            data = json.loads(handle.read(MAX_PACKAGE_JSON_BYTES))
    except (OSError, ValueError):
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


def _find_command(
    command: str, packages: tuple[str, ...], install_dir: str | None, path: str
) -> str:
    if install_dir is None:
        found = shutil.which(command, path=path)
        if found is None:
            package = packages[0] if packages else command
            raise AgentInstallError(
                f"{command!r} is not on PATH: install it (npm install -g {package}) or name "
                "its install with --agent-install DIR"
            )
        return found
    base = Path(install_dir).absolute()
    if not base.is_dir():
        raise AgentInstallError(f"--agent-install {install_dir}: not a directory")
    for sub in COMMAND_DIRS:
        candidate = base / sub / command
        if os.access(candidate, os.X_OK) and candidate.is_file():
            return str(candidate)
    places = ", ".join(f"{sub}/{command}" for sub in COMMAND_DIRS)
    raise AgentInstallError(f"--agent-install {install_dir}: none of {places} is there")


def _package_dir(executable: Path, packages: tuple[str, ...]) -> Path:
    for directory in executable.parents:
        if (directory / "package.json").is_file() and _package_name(directory) in packages:
            return directory
    names = ", ".join(packages)
    raise AgentInstallError(
        f"{executable} is not inside an npm package named {names}: name the install with "
        "--agent-install DIR"
    )


def _siblings(package: Path, packages: tuple[str, ...]) -> tuple[str, ...]:
    """The package and its same-prefix siblings (``codex`` and ``codex-linux-x64``)."""
    folder = package.parent
    stems = {name.rsplit("/", 1)[-1] for name in packages}
    found = {str(package)}
    for entry in sorted(folder.iterdir()):
        named = any(entry.name == stem or entry.name.startswith(stem + "-") for stem in stems)
        if named and entry.is_dir() and not entry.is_symlink():
            found.add(str(entry))
    return tuple(sorted(found))


def _runtime_bin(path: str) -> str | None:
    node = shutil.which("node", path=path)
    if node is None:
        return None
    real = os.path.realpath(node)
    if any(real == p or real.startswith(p + "/") for p in SYSTEM_PREFIXES):
        return None
    return str(Path(real).parent)


def find_install(
    command: str, packages: tuple[str, ...], *, install_dir: str | None, path: str
) -> Install:
    """Find agent ``command`` (on ``path``, or in ``install_dir``) and its packages.

    Raises:
        AgentInstallError: the command is not found, or is not inside one of ``packages``.
    """
    found = Path(os.path.realpath(_find_command(command, packages, install_dir, path)))
    package = _package_dir(found, packages)
    return Install(str(found), _siblings(package, packages), _runtime_bin(path))
