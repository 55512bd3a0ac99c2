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

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

RUNTIME_DIR_NAME: Final = "glove"
STATE_RUNTIME_NAME: Final = "run"
"""The fallback runtime directory's name inside the state directory (``.../glove/run``)."""
RUN_USER: Final = Path("/run/user")

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
    env = os.environ if environ is None else environ
    value = env.get("XDG_STATE_HOME", "")
    if value.startswith("/"):  # the XDG spec: a relative value is ignored
        return Path(value) / "glove"
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".local" / "state" / "glove"


def _unusable_base(path: Path, *, missing_ok: bool) -> str | None:  # noqa: PLR0911 - one per refusal
    """Why ``path`` cannot hold the runtime directory, or None if it can."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None if missing_ok else f"{path} does not exist"
    except OSError as exc:
        return f"{path} cannot be examined ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symlink"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a directory"
    if info.st_uid != os.getuid():
        return f"{path} is owned by uid {info.st_uid}, not by uid {os.getuid()}"
    if stat.S_IMODE(info.st_mode) & 0o022:
        return f"{path} has mode {stat.S_IMODE(info.st_mode):04o}: group or others can write it"
    return None


def choose_runtime_dir(environ: Mapping[str, str] | None = None) -> RuntimeDirChoice:
    """The runtime directory for this user (not created), by the rule of the module
    docstring, with the reason for the choice and for each candidate passed over."""
    env = os.environ if environ is None else environ
    passed: list[str] = []
    xdg = env.get("XDG_RUNTIME_DIR", "")
    if not xdg:
        passed.append("XDG_RUNTIME_DIR is not set")
    elif not xdg.startswith("/"):
        passed.append(f"XDG_RUNTIME_DIR={xdg!r} is not an absolute path")
    elif (why := _unusable_base(Path(xdg), missing_ok=True)) is not None:
        passed.append(f"XDG_RUNTIME_DIR: {why}")
    else:
        return RuntimeDirChoice(
            Path(xdg) / RUNTIME_DIR_NAME, "XDG_RUNTIME_DIR", "XDG_RUNTIME_DIR is set", ()
        )
    run_user = RUN_USER / str(os.getuid())
    why = _unusable_base(run_user, missing_ok=False)
    if why is None:
        return RuntimeDirChoice(
            run_user / RUNTIME_DIR_NAME,
            "/run/user",
            "systemd-logind's directory of this user exists",
            tuple(passed),
        )
    passed.append(why)
    return RuntimeDirChoice(
        glove_state_dir(env) / STATE_RUNTIME_NAME,
        "state",
        "no per-user runtime directory: a private one under this user's state directory",
        tuple(passed),
    )
