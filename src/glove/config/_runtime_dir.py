"""Which runtime directory a user's clients and ``gloved`` use, and why (never a shared one).

First usable of:

1. ``$XDG_RUNTIME_DIR/glove``, when ``XDG_RUNTIME_DIR`` is an absolute path that does not
   exist yet or is a directory (not a symlink) of ours that group and others cannot write;
2. ``/run/user/<uid>/glove``, when systemd-logind's directory of ours exists by that rule;
3. ``$XDG_STATE_HOME/glove/run`` (``~/.local/state/glove/run``): inside the user's own 0700
   state directory, so no other user can create or replace it.

A shared directory (``/tmp``) is never a candidate: another user could create the name first
and keep ``gloved`` from starting (issue 20, item 5). The files in it and their checks are
the control service's (:mod:`glove.control`): this module only chooses, it creates nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, cast

from glove.config._runtime_rule import (
    RUNTIME_DIR_NAME,
    STATE_RUNTIME_NAME,
    choose,
    glove_state_dir_text,
)

#: ``/run/user``, where systemd-logind makes each user's runtime directory.
RUN_USER: Final = Path("/run/user")

__all__ = [
    "RUNTIME_DIR_NAME",
    "RUN_USER",
    "STATE_RUNTIME_NAME",
    "RuntimeDirChoice",
    "RuntimeSource",
    "choose_runtime_dir",
    "glove_state_dir",
]

RuntimeSource = Literal["XDG_RUNTIME_DIR", "/run/user", "state"]


@dataclass(frozen=True, slots=True)
class RuntimeDirChoice:
    """Which runtime directory this user's clients and gloved use, and why."""

    directory: Path
    source: RuntimeSource
    reason: str
    passed_over: tuple[str, ...] = ()
    """Why each earlier candidate was not used, in order."""


def glove_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/glove`` (``$HOME/.local/state/glove`` when it is unset or relative)."""
    return Path(glove_state_dir_text(environ))


def choose_runtime_dir(environ: Mapping[str, str] | None = None) -> RuntimeDirChoice:
    """The runtime directory for this user (not created), by the rule of the module
    docstring, with the reason for the choice and for each candidate passed over.

    The rule is :func:`glove.config._runtime_rule.choose`, on plain strings (no dataclass,
    no pathlib) for the CLI's one-call commands; this wraps its answer.
    """
    directory, source, reason, passed = choose(environ)
    return RuntimeDirChoice(Path(directory), cast("RuntimeSource", source), reason, passed)
