"""``glove doctor``'s checks of the per-user service: the runtime directory, lingering,
delegation, the unit.

* ``runtime_dir``: which directory holds ``gloved.sock`` for this user and why (the rule of
  ``glove.control.choose_runtime_dir``: ``XDG_RUNTIME_DIR``, ``/run/user/<uid>``, or the
  private fallback under the state directory), each candidate passed over and why, whether
  the directory is safe, and how the socket path fits a Unix socket address.
* ``lingering``: without ``loginctl enable-linger`` the user's systemd (and gloved with it)
  stops at logout and starts only at the next login.
* ``delegation``: which cgroup controllers reach gloved. The unit asks for
  ``Delegate=cpu memory pids``, but a user manager can pass on only what the system gave
  ``user@<uid>.service`` (by default ``memory`` and ``pids``; ``cpu`` needs a drop-in as
  root), and on a host whose controllers are bound to cgroup v1 the v2 tree has none.
* ``daemon_unit``: whether ``gloved.service`` is installed as install wrote it, and active.

All four are informational (never required): gloved runs without them, with weaker
guarantees the summary names.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from glove.host._doctor import CGROUP_ROOT, V2_CONTROLLERS_WANTED, Check

LOGINCTL_DEADLINE_S: Final = 10.0
MIXED_ENVIRONMENTS: Final = (
    "a client run where XDG_RUNTIME_DIR is set (a login session) looks there instead: "
    "give every process the same one"
)
DELEGATE_DROPIN: Final = "/etc/systemd/system/user@.service.d/delegate.conf"


def _loginctl_linger(uid: int) -> tuple[str | None, str]:
    """``(yes|no, "")`` from logind, or ``(None, why not)``."""
    exe = shutil.which("loginctl")
    if exe is None:
        return None, "loginctl is not installed"
    try:
        out = subprocess.run(
            [exe, "show-user", str(uid), "--property=Linger", "--value"],
            capture_output=True,
            text=True,
            timeout=LOGINCTL_DEADLINE_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"loginctl did not answer: {exc}"
    if out.returncode != 0:
        return None, " ".join(out.stderr.split()) or f"loginctl exited {out.returncode}"
    return out.stdout.strip(), ""


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def check_runtime_dir(environ: Mapping[str, str] | None = None) -> Check:
    """Which runtime directory clients and gloved use here, and why."""
    from glove.control import (
        MAX_SOCKET_PATH_BYTES,
        SOCKET_NAME,
        ControlError,
        check_owner_only_dir,
        choose_runtime_dir,
        long_socket_route,
    )

    choice = choose_runtime_dir(environ)
    where = choice.directory
    lines = [f"{where}: {choice.reason}"]
    lines += [f"not used: {why}" for why in choice.passed_over]
    sock_bytes = len(os.fsencode(where / SOCKET_NAME))
    too_long = sock_bytes > MAX_SOCKET_PATH_BYTES
    if too_long:
        route = "reached through /proc/self/fd/N/" if long_socket_route() else "unreachable"
        lines.append(
            f"{SOCKET_NAME}'s path is {sock_bytes} bytes, over the {MAX_SOCKET_PATH_BYTES} a "
            f"Unix socket takes: {route}"
        )
    legacy = Path(f"/tmp/glove-{os.getuid()}")  # noqa: S108 - only reported, never used
    with contextlib.suppress(OSError):
        owner = legacy.lstat().st_uid
        lines.append(f"{legacy} exists (uid {owner}) and is not used: Glove never looks in /tmp")
    fix = f"loginctl enable-linger {_user_name(os.getuid())}"
    if too_long and not long_socket_route():
        return Check(
            "runtime_dir",
            "fail",
            False,
            f"gloved.sock's path in {where} is too long for a Unix socket",
            detail="\n".join(lines),
            fix="set XDG_RUNTIME_DIR to a shorter directory of yours (or pass --runtime-dir)",
        )
    try:
        check_owner_only_dir(where)
    except FileNotFoundError:
        lines.append("it does not exist yet: gloved or glove setup creates it 0700")
    except (ControlError, OSError) as exc:
        return Check(
            "runtime_dir",
            "fail",
            False,
            f"{where} is unsafe: gloved refuses to start there",
            detail="\n".join([*lines, str(exc)]),
            fix=f"remove or fix {where} (it is yours to fix; Glove never repairs it)",
        )
    if choice.source == "state":
        return Check(
            "runtime_dir",
            "warn",
            False,
            f"runtime directory {where} (no XDG_RUNTIME_DIR, no /run/user/{os.getuid()})",
            detail="\n".join([*lines, MIXED_ENVIRONMENTS]),
            fix=f"{fix}, then log in again: systemd-logind keeps /run/user/{os.getuid()} "
            "and sets XDG_RUNTIME_DIR",
        )
    return Check(
        "runtime_dir", "ok", False, f"runtime directory {where} ({choice.source})", "\n".join(lines)
    )


def check_lingering() -> Check:
    """Does this user's service manager outlive their logins?"""
    if not sys.platform.startswith("linux"):
        return Check("lingering", "ok", False, "not applicable: launchd agents follow the login")
    uid = os.getuid()
    linger, why = _loginctl_linger(uid)
    fix = f"loginctl enable-linger {_user_name(uid)}"
    if linger == "yes":
        return Check("lingering", "ok", False, "lingering enabled: gloved keeps running at logout")
    if linger is None:
        return Check(
            "lingering",
            "warn",
            False,
            "cannot ask systemd-logind whether this user lingers",
            detail=why,
            fix=fix,
        )
    return Check(
        "lingering",
        "warn",
        False,
        "lingering disabled: gloved and its sessions stop when this user's last login ends",
        detail=f"loginctl show-user {uid}: Linger={linger}",
        fix=fix,
    )


def _v2_root() -> Path | None:
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return CGROUP_ROOT
    if (CGROUP_ROOT / "unified" / "cgroup.controllers").exists():
        return CGROUP_ROOT / "unified"
    return None


def _gloved_control_group() -> str | None:
    """The running gloved.service's cgroup, or None (not installed, not running, no manager)."""
    from glove.host._daemon_install import query_state
    from glove.host._service_files import default_layout
    from glove.host._service_managers import run_tool
    from glove.host.errors import ServiceError

    try:
        state = query_state(default_layout("systemd"), run_tool)
    except ServiceError:
        return None
    return state.control_group if state.active else None


def check_delegation(control_group: str | None = None) -> Check:
    """Which of cpu, memory, pids reach gloved's cgroup (or the user manager's, before install)."""
    if not sys.platform.startswith("linux"):
        return Check("delegation", "ok", False, "not applicable: no cgroups on this platform")
    control_group = control_group or _gloved_control_group()
    root = _v2_root()
    if root is None:
        return Check(
            "delegation",
            "warn",
            False,
            "no cgroup v2 hierarchy: Delegate= gives gloved nothing, limits use cgroup v1",
        )
    uid = os.getuid()
    if control_group:
        where, label = root / control_group.lstrip("/"), "gloved.service"
    else:
        where = root / "user.slice" / f"user-{uid}.slice" / f"user@{uid}.service"
        label = f"user@{uid}.service"
    try:
        available = set((where / "cgroup.controllers").read_text().split())
    except OSError as exc:
        return Check(
            "delegation",
            "warn",
            False,
            f"cannot read the controllers of {label}",
            detail=f"{where}: {exc.strerror}",
        )
    have = [c for c in V2_CONTROLLERS_WANTED if c in available]
    missing = [c for c in V2_CONTROLLERS_WANTED if c not in available]
    detail = f"{where}: cgroup.controllers = [{' '.join(sorted(available)) or 'none'}]"
    if not missing:
        return Check("delegation", "ok", False, f"cpu, memory, pids delegated to {label}", detail)
    hybrid = root != CGROUP_ROOT
    return Check(
        "delegation",
        "warn",
        False,
        f"{label} gets [{' '.join(have) or 'none'}] of cpu, memory, pids; "
        f"missing [{' '.join(missing)}]",
        detail=detail
        + (
            "; the controllers are bound to cgroup v1 on this host (hybrid), so v2 "
            "delegation cannot supply them"
            if hybrid
            else ""
        ),
        fix="boot with systemd.unified_cgroup_hierarchy=1"
        if hybrid
        else f"as root: {DELEGATE_DROPIN} with [Service] Delegate=cpu cpuset io memory pids, "
        "then log in again",
    )


def check_daemon_unit() -> Check:
    """Is gloved installed as this user's service, as install wrote it, and running?"""
    from glove.host._daemon_install import status
    from glove.host.errors import ServiceError

    try:
        report = status()
    except ServiceError as exc:
        return Check("daemon_unit", "warn", False, f"cannot inspect the service: {exc}")
    state = report.manager
    where = f"{report.service} at {report.path}"
    if not report.installed:
        return Check(
            "daemon_unit",
            "warn",
            False,
            f"{report.service} is not installed",
            fix="glove daemon install",
        )
    if report.modified:
        return Check(
            "daemon_unit",
            "warn",
            False,
            f"{where} was edited after install wrote it",
            fix="move local changes to a drop-in, then glove daemon install --force",
        )
    if state is None or not state.active:
        why = report.manager_error or (state.state if state else "unknown")
        return Check(
            "daemon_unit",
            "warn",
            False,
            f"{where} is installed but not running ({why})",
            fix="glove daemon start; glove daemon logs",
        )
    detail = f"pid {state.main_pid}; {state.status_text or 'no status'}; socket {report.socket}"
    if not report.current:
        return Check(
            "daemon_unit",
            "warn",
            False,
            f"{where} runs, but is not what install would write now (gloved moved?)",
            detail=detail,
            fix="glove daemon install --force",
        )
    return Check("daemon_unit", "ok", False, f"{where} installed and {state.state}", detail)
