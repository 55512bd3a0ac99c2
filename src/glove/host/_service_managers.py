"""What ``glove daemon`` asks of systemd and launchd: argv lists, and what they answer.

Every command is an argv list run without a shell; the unit name and the label are the
fixed constants of :mod:`glove.host._service_units`. The tools are looked up on ``PATH``
when a command runs, and a missing one is a :class:`ServiceManagerFailed` naming it.

systemd (Linux), a user unit::

    install    systemctl --user daemon-reload; systemctl --user enable --now gloved.service
    start      systemctl --user start gloved.service          (stop, restart alike)
    status     systemctl --user show gloved.service --property=...
    uninstall  systemctl --user disable --now gloved.service; ... daemon-reload
    logs       journalctl --user --unit gloved.service --lines N [--follow]

launchd (macOS), a LaunchAgent in the ``gui/<uid>`` domain::

    install    launchctl bootstrap gui/<uid> ~/Library/LaunchAgents/org.glove.gloved.plist
    start      launchctl kickstart gui/<uid>/org.glove.gloved
    stop       launchctl kill SIGTERM gui/<uid>/org.glove.gloved
    restart    launchctl kickstart -k gui/<uid>/org.glove.gloved
    status     launchctl print gui/<uid>/org.glove.gloved
    uninstall  launchctl bootout gui/<uid>/org.glove.gloved
    logs       tail -n N [-F] ~/Library/Logs/gloved.log
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import msgspec

from glove.host._service_units import LAUNCHD_LABEL, SYSTEMD_UNIT_NAME
from glove.host.errors import NoUserManager, ServiceManagerFailed

Platform = Literal["systemd", "launchd"]
Action = Literal["start", "stop", "restart"]
Argv = list[str]

# What `systemctl show` is asked for; the status report is built from these.
SYSTEMD_PROPERTIES: Final = (
    "LoadState",
    "ActiveState",
    "SubState",
    "UnitFileState",
    "FragmentPath",
    "MainPID",
    "StatusText",
    "NRestarts",
    "WatchdogUSec",
    "Result",
    "ControlGroup",
)
USEC_PER_S: Final = 1_000_000
TOOL_DEADLINE_S: Final = 60.0
MAX_STDERR_CHARS: Final = 2000
_TIMESPAN_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|min|h|d|w)")
_TIMESPAN_UNIT_S: Final = {
    "us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0,
}  # fmt: skip
_LAUNCHCTL_FIELD: Final = re.compile(r"^\s*(state|pid|last exit code)\s*=\s*(.+?)\s*$", re.M)


# -- running the service manager -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One finished service-manager command."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str]], ToolResult]


def run_tool(argv: Sequence[str], *, timeout: float = TOOL_DEADLINE_S) -> ToolResult:
    """Run a service-manager command (an argv list, never a shell) and capture its output.

    Raises:
        ServiceManagerFailed: the tool is not on ``PATH``, cannot start, or overran.
    """
    exe = shutil.which(argv[0])
    if exe is None:
        raise ServiceManagerFailed(argv, None, "", f"{argv[0]} is not on PATH")
    try:
        done = subprocess.run(
            [exe, *argv[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ServiceManagerFailed(argv, None, "", f"`{display(argv)}` overran {timeout}s") from exc
    except OSError as exc:
        raise ServiceManagerFailed(argv, None, "", f"cannot run {exe}: {exc.strerror}") from exc
    return ToolResult(list(argv), done.returncode, done.stdout, done.stderr)


def display(argv: Sequence[str]) -> str:
    """``argv`` as a person reads it (a long ``--property=`` list shortened)."""
    return " ".join(a if len(a) <= 40 else a[:37] + "..." for a in argv)


def checked(runner: Runner, argv: Sequence[str]) -> ToolResult:
    """Run ``argv`` through ``runner``; a non-zero exit is an error.

    Raises:
        ServiceManagerFailed: the command failed.
    """
    result = runner(argv)
    if result.returncode != 0:
        stderr = result.stderr.strip()[-MAX_STDERR_CHARS:]
        raise ServiceManagerFailed(
            argv,
            result.returncode,
            stderr,
            f"`{display(argv)}` failed (exit {result.returncode}): {stderr or 'no output'}",
        )
    return result


#: ``systemctl --user is-system-running`` words that mean a manager answers (``degraded``
#: exits non-zero but runs units); ``offline`` or nothing means there is none to talk to.
_MANAGER_UP: Final = frozenset(
    {"running", "degraded", "starting", "initializing", "maintenance", "stopping"}
)


def require_user_manager(runner: Runner, environ: Mapping[str, str]) -> None:
    """Refuse before anything is written when this user has no systemd user manager.

    Raises:
        NoUserManager: systemctl --user cannot reach one (the message says how to get one).
    """
    argv = SystemdUser().probe()
    try:
        result = runner(argv)
    except ServiceManagerFailed as exc:  # systemctl missing, or it overran
        raise NoUserManager(argv, exc.returncode, exc.stderr, str(exc)) from exc
    word = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if word in _MANAGER_UP:
        return
    said = (result.stderr.strip().splitlines() or [word or "no answer"])[-1]
    runtime = environ.get("XDG_RUNTIME_DIR")
    where = f"XDG_RUNTIME_DIR={runtime}" if runtime else "XDG_RUNTIME_DIR is not set"
    user = environ.get("USER") or environ.get("LOGNAME") or _user_name()
    raise NoUserManager(
        argv,
        result.returncode,
        result.stderr.strip()[-MAX_STDERR_CHARS:],
        f"this user has no systemd user manager (`{display(argv)}`: {said}; {where}): log "
        f"in through a login session (ssh, a console; not su or sudo), or keep one running "
        f"with `loginctl enable-linger {user}` (as root: `sudo loginctl enable-linger {user}`), "
        "then run glove daemon install again; or start `gloved` yourself",
    )


def _user_name() -> str:
    import os
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return "$USER"


class ServiceState(msgspec.Struct, frozen=True):
    """What the service manager says about the unit (fields it does not report are None).

    ``active`` is true while the manager considers the service up (systemd
    ``ActiveState=active``, launchd ``state = running``).
    """

    loaded: bool
    active: bool
    state: str
    sub_state: str | None = None
    enabled: str | None = None
    main_pid: int | None = None
    status_text: str | None = None
    restarts: int | None = None
    watchdog_s: float | None = None
    result: str | None = None
    fragment_path: str | None = None
    control_group: str | None = None


class SystemdUser:
    """The systemd user manager (``systemctl --user``)."""

    platform: Final[Platform] = "systemd"
    service: Final = SYSTEMD_UNIT_NAME

    def reload(self) -> Argv:
        """Make the manager re-read unit files."""
        return ["systemctl", "--user", "daemon-reload"]

    def probe(self) -> Argv:
        """Ask whether this user's manager runs at all (its one-word state)."""
        return ["systemctl", "--user", "is-system-running"]

    def activate(self) -> Argv:
        """Enable at login and start now."""
        return ["systemctl", "--user", "enable", "--now", self.service]

    def deactivate(self) -> Argv:
        """Stop now and disable."""
        return ["systemctl", "--user", "disable", "--now", self.service]

    def action(self, action: Action) -> Argv:
        """Start, stop or restart the service."""
        return ["systemctl", "--user", action, self.service]

    def show(self) -> Argv:
        """Ask for the properties :meth:`parse_state` reads."""
        return [
            "systemctl",
            "--user",
            "show",
            self.service,
            "--property=" + ",".join(SYSTEMD_PROPERTIES),
        ]

    def logs(self, lines: int, *, follow: bool) -> Argv:
        """Read the service's journal."""
        argv = ["journalctl", "--user", "--unit", self.service, "--lines", str(lines)]
        return [*argv, "--follow"] if follow else [*argv, "--no-pager"]

    @staticmethod
    def parse_state(stdout: str) -> ServiceState:
        """Build the state from ``systemctl show`` output (``KEY=VALUE`` lines)."""
        props: dict[str, str] = {}
        for line in stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                props[key] = value
        return _systemd_state(props)


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def parse_timespan(text: str | None) -> float | None:
    """Seconds in a span as ``systemctl show`` prints it (``30s``, ``1min 30s``, ``500ms``;
    a bare number is microseconds). None for ``0``, ``infinity``, empty or unparsable."""
    if not text or text in ("0", "infinity"):
        return None
    if text.isdigit():
        return int(text) / USEC_PER_S
    parts = text.split()
    matches = [_TIMESPAN_PART.fullmatch(p) for p in parts]
    if not all(matches):
        return None
    return sum(float(m.group(1)) * _TIMESPAN_UNIT_S[m.group(2)] for m in matches if m)


def _systemd_state(props: Mapping[str, str]) -> ServiceState:
    load = props.get("LoadState", "")
    pid = _int_or_none(props.get("MainPID"))
    return ServiceState(
        loaded=load == "loaded",
        active=props.get("ActiveState") == "active",
        state=props.get("ActiveState", "unknown"),
        sub_state=props.get("SubState") or None,
        enabled=props.get("UnitFileState") or None,
        main_pid=pid or None,
        status_text=props.get("StatusText") or None,
        restarts=_int_or_none(props.get("NRestarts")),
        watchdog_s=parse_timespan(props.get("WatchdogUSec")),
        result=props.get("Result") or None,
        fragment_path=props.get("FragmentPath") or None,
        control_group=props.get("ControlGroup") or None,
    )


class Launchd:
    """launchd's per-user ``gui/<uid>`` domain (``launchctl``)."""

    platform: Final[Platform] = "launchd"
    service: Final = LAUNCHD_LABEL

    def __init__(self, uid: int, plist: Path, log_path: Path) -> None:
        self.domain = f"gui/{uid}"
        self.target = f"{self.domain}/{LAUNCHD_LABEL}"
        self.plist = plist
        self.log_path = log_path

    def reload(self) -> Argv:
        """Unload the job so the next bootstrap reads the new plist."""
        return ["launchctl", "bootout", self.target]

    def activate(self) -> Argv:
        """Load the plist into the user's domain (RunAtLoad starts it)."""
        return ["launchctl", "bootstrap", self.domain, str(self.plist)]

    def deactivate(self) -> Argv:
        """Stop and unload the job."""
        return ["launchctl", "bootout", self.target]

    def action(self, action: Action) -> Argv:
        """Start, stop or restart the job (stop is SIGTERM: a clean exit is not restarted)."""
        if action == "start":
            return ["launchctl", "kickstart", self.target]
        if action == "stop":
            return ["launchctl", "kill", "SIGTERM", self.target]
        return ["launchctl", "kickstart", "-k", self.target]

    def show(self) -> Argv:
        """Ask for the job's state."""
        return ["launchctl", "print", self.target]

    def logs(self, lines: int, *, follow: bool) -> Argv:
        """Read the job's log file."""
        return ["tail", "-n", str(lines), *(["-F"] if follow else []), str(self.log_path)]

    @staticmethod
    def parse_state(stdout: str) -> ServiceState:
        """Build the state from ``launchctl print`` output (``key = value`` lines).

        Only the fields read here are relied on; launchctl's output format is not a
        stable interface, so anything unparsed is left None.
        """
        fields = {m.group(1): m.group(2) for m in _LAUNCHCTL_FIELD.finditer(stdout)}
        state = fields.get("state", "unknown")
        return ServiceState(
            loaded=True,
            active=state == "running",
            state=state,
            main_pid=_int_or_none(fields.get("pid")),
            result=fields.get("last exit code"),
        )


ServiceManager = SystemdUser | Launchd
