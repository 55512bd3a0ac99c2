"""The mediation's host files a sandbox must never see, or never write (decision 0006).

Its configuration, policy, audit log (and rotated files) and each upstream's working
directory (the directory and its files) are never shown to the sandbox; each upstream's
program and the files it is started with are never shown writable. ``glove run`` and a
``gloved`` session whose harness names an MCP configuration both protect them.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Final

from glove.container import Protected
from glove.mcp._config import McpConfig, UpstreamConfig, child_environment

#: Rotated audit files protected beside the log (``audit.log.1`` .. ``.N``).
PROTECTED_ROTATIONS: Final = 16


def _program_of(upstream: UpstreamConfig, cwd: str) -> str | None:
    """The host file an upstream runs, as the subprocess would find it."""
    name = upstream.command[0]
    if "/" in name:
        return os.path.normpath(Path(cwd, name))
    path = child_environment(upstream, dict(os.environ)).get("PATH", os.defpath)
    return shutil.which(name, path=path)


def _files_among(arguments: list[str], cwd: str) -> list[str]:
    """Arguments that name an existing regular file (a script the upstream loads)."""
    found: list[str] = []
    for argument in arguments:
        if not argument or argument.startswith("-") or "\0" in argument:
            continue
        candidate = os.path.normpath(Path(cwd, argument))
        try:
            if stat.S_ISREG(Path(candidate).stat().st_mode):
                found.append(candidate)
        except (OSError, ValueError):
            continue
    return found


def mediator_protected(config_path: str, config: McpConfig) -> tuple[Protected, ...]:
    """Every host path of the mediation the sandbox must not see (or not write)."""
    items = [
        Protected(str(Path(config_path).absolute()), "the mediator's configuration"),
        Protected(config.policy, "the mediator's policy file"),
        Protected(config.audit, "the mediator's audit log"),
        Protected(f"{config.audit}.lock", "the audit log's lock"),
    ]
    items += [
        Protected(f"{config.audit}.{n}", "a rotated audit log")
        for n in range(1, PROTECTED_ROTATIONS + 1)
    ]
    for upstream_id, upstream in config.upstreams.items():
        for header, source in upstream.headers.items():
            if source.file is not None:  # a key file (a bearer token): never seen at all
                what = f"the {header} header's key file of upstream {upstream_id!r}"
                items.append(Protected(source.file, what))
        if not upstream.command:
            continue  # a Streamable HTTP upstream: no process, no working directory
        cwd = upstream.cwd or str(Path(config_path).absolute().parent)
        # The directory itself and its files, never a subdirectory: a workspace beside the
        # configuration (config/ws) is fine, a workspace that is (or holds) it is not.
        items.append(Protected(cwd, f"the working directory of upstream {upstream_id!r}"))
        program = _program_of(upstream, cwd)
        if program is not None:
            what = f"the program of upstream {upstream_id!r}"
            items.append(Protected(program, what, writable_only=True))
        for path in _files_among(upstream.command[1:], cwd):
            what = f"a file upstream {upstream_id!r} is started with"
            items.append(Protected(path, what, writable_only=True))
    return tuple(items)
