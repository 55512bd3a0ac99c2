"""The runtime directory's rule on plain strings: what :func:`choose_runtime_dir` decides.

:func:`glove.config.choose_runtime_dir` returns a :class:`RuntimeDirChoice` (a dataclass of
``Path`` values); ``dataclasses`` and ``pathlib`` together cost the CLI's one-call commands
about 35 ms of CPU on every start (docs/decisions/0049-a-json-only-one-shot-call.md), so the
rule itself lives here on ``str`` paths and ``choose_runtime_dir`` wraps its answer. Paths
are written as ``str(PurePosixPath(...))`` writes them (:func:`path_text`), so every message
and every path reads the same through either.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import Final

RUNTIME_DIR_NAME: Final = "glove"
STATE_RUNTIME_NAME: Final = "run"
"""The fallback runtime directory's name inside the state directory (``.../glove/run``)."""
RUN_USER: Final = "/run/user"

#: ``(directory, source, reason, passed_over)``: a :class:`RuntimeDirChoice`'s fields.
Choice = tuple[str, str, str, tuple[str, ...]]


def path_text(*parts: str) -> str:
    """``parts`` joined and written as ``str(PurePosixPath(*parts))`` writes them: repeated
    slashes and ``.`` components dropped, no trailing slash, ``//`` kept at the start only
    when it is exactly two, ``.`` for nothing (``..`` is kept: it is not resolved)."""
    root = ""
    names: list[str] = []
    for part in parts:
        if part.startswith("/"):  # an absolute part starts over, as os.path.join does
            slashes = len(part) - len(part.lstrip("/"))
            root = "//" if slashes == 2 else "/"
            names = []
        names.extend(name for name in part.split("/") if name not in ("", "."))
    text = root + "/".join(names)
    return text or "."


def glove_state_dir_text(environ: Mapping[str, str] | None = None) -> str:
    """``$XDG_STATE_HOME/glove`` (``$HOME/.local/state/glove`` when it is unset or relative)."""
    env = os.environ if environ is None else environ
    value = env.get("XDG_STATE_HOME", "")
    if value.startswith("/"):  # the XDG spec: a relative value is ignored
        return path_text(value, "glove")
    home = env.get("HOME") or os.path.expanduser("~")  # noqa: PTH111 - Path.home(), no pathlib
    return path_text(home, ".local", "state", "glove")


def _unusable_base(path: str, *, missing_ok: bool) -> str | None:  # noqa: PLR0911 - one per refusal
    """Why ``path`` cannot hold the runtime directory, or None if it can."""
    try:
        info = os.lstat(path)
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


def choose(environ: Mapping[str, str] | None = None) -> Choice:
    """The runtime directory for this user (not created), by the rule of
    :mod:`glove.config._runtime_dir`, with the reason and each candidate passed over."""
    env = os.environ if environ is None else environ
    passed: list[str] = []
    xdg = env.get("XDG_RUNTIME_DIR", "")
    if not xdg:
        passed.append("XDG_RUNTIME_DIR is not set")
    elif not xdg.startswith("/"):
        passed.append(f"XDG_RUNTIME_DIR={xdg!r} is not an absolute path")
    elif (why := _unusable_base(path_text(xdg), missing_ok=True)) is not None:
        passed.append(f"XDG_RUNTIME_DIR: {why}")
    else:
        return path_text(xdg, RUNTIME_DIR_NAME), "XDG_RUNTIME_DIR", "XDG_RUNTIME_DIR is set", ()
    run_user = path_text(RUN_USER, str(os.getuid()))
    why = _unusable_base(run_user, missing_ok=False)
    if why is None:
        return (
            path_text(run_user, RUNTIME_DIR_NAME),
            "/run/user",
            "systemd-logind's directory of this user exists",
            tuple(passed),
        )
    passed.append(why)
    return (
        path_text(glove_state_dir_text(env), STATE_RUNTIME_NAME),
        "state",
        "no per-user runtime directory: a private one under this user's state directory",
        tuple(passed),
    )


def chosen_runtime_dir(environ: Mapping[str, str] | None = None) -> str:
    """The directory :func:`choose` picks (what ``choose_runtime_dir().directory`` names)."""
    return choose(environ)[0]
