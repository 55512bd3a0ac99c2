"""``glove daemon``: install, uninstall, control and inspect ``gloved`` as a per-user service.

::

    install    resolve gloved locally -> render the template -> compare with what is there
               -> write atomically (+ the manifest) -> daemon-reload -> enable --now
    uninstall  check every recorded file still hashes as written -> disable --now -> remove
               the files, the link enable made, the directories install created -> reload
    start | stop | restart | status | logs

The rules:

* The executable, the unit name, the label and the arguments come only from local
  resolution and the templates; nothing here takes them from the control socket, a plan or
  the command line.
* A second install with nothing to change writes nothing and runs no command that changes
  the manager's state (it only asks for the state).
* A service file install did not write, or one edited since (its hash differs from the
  manifest's), is reported and left alone unless ``force``: changes belong in a drop-in.
* Uninstall removes exactly what install wrote.
* systemd must load the unit from the file install wrote: if the user manager reads another
  ``XDG_CONFIG_HOME`` (or a packaged unit shadows ours), install says so instead of
  reporting success.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Literal

import msgspec

from glove.host._service_files import (
    MANIFEST_MODE,
    MANIFEST_VERSION,
    PRIVATE_DIR_MODE,
    PUBLIC_DIR_MODE,
    SERVICE_FILE_MODE,
    WANTS_DIR_NAME,
    Layout,
    Manifest,
    ManifestEntry,
    ServiceFile,
    atomic_write,
    check_executable,
    check_state_dir,
    classify,
    default_layout,
    encode_manifest,
    exclusive,
    fsync_dir,
    make_dirs,
    missing_dirs,
    read_manifest,
    remove_empty_dirs,
    render_files,
    resolve_gloved,
    sha256,
)
from glove.host._service_managers import (
    Action,
    Argv,
    Platform,
    Runner,
    ServiceState,
    SystemdUser,
    checked,
    require_user_manager,
    run_tool,
)
from glove.host.errors import (
    NoUserManager,
    ServiceError,
    ServiceFileModified,
    ServiceManagerFailed,
)

FileAction = Literal["created", "updated", "replaced", "unchanged", "removed", "absent"]
CONTROL_PROBE_DEADLINE_S = 2.0
_ACTION_FOR: dict[str, FileAction] = {
    "absent": "created",
    "ours": "updated",
    "foreign": "replaced",
    "same": "unchanged",
}


class FileChange(msgspec.Struct, frozen=True):
    """What install or uninstall did to one file."""

    path: str
    action: FileAction


class InstallPlan(msgspec.Struct, frozen=True):
    """What install would do (``--dry-run``): every file it would write, every command."""

    platform: Platform
    service: str
    executable: str
    files: list[ServiceFile]
    commands: list[Argv]


class InstallReport(msgspec.Struct, frozen=True):
    """What install did. ``changed`` is false when it wrote nothing and ran nothing."""

    platform: Platform
    service: str
    path: str
    executable: str
    changed: bool
    files: list[FileChange]
    commands: list[Argv]
    state: ServiceState | None
    notes: list[str]


class UninstallReport(msgspec.Struct, frozen=True):
    """What uninstall removed. ``changed`` is false when nothing was installed."""

    platform: Platform
    service: str
    changed: bool
    files: list[FileChange]
    directories: list[str]
    commands: list[Argv]
    notes: list[str]


class DaemonStatus(msgspec.Struct, frozen=True):
    """Is the service installed as install wrote it, is it running, does gloved answer?

    ``modified`` is true when the file on disk is not what install wrote; ``current`` is
    true when it equals what install would write now (false after an upgrade moved
    ``gloved``). ``manager`` is None when the service manager could not be asked
    (``manager_error`` says why).
    """

    platform: Platform
    service: str
    path: str
    installed: bool
    modified: bool
    current: bool
    executable: str | None
    manager: ServiceState | None
    manager_error: str | None
    socket: str
    reachable: bool


def _manifest_for(layout: Layout, executable: Path, content: bytes, dirs: list[str]) -> Manifest:
    return Manifest(
        version=MANIFEST_VERSION,
        platform=layout.platform,
        service=layout.manager.service,
        executable=str(executable),
        files=[ManifestEntry(str(layout.service_path), sha256(content))],
        directories=dirs,
    )


def _recorded_sha(manifest: Manifest | None, path: Path) -> str | None:
    if manifest is None:
        return None
    return next((e.sha256 for e in manifest.files if e.path == str(path)), None)


def _refuse_foreign(path: Path, why: str, verb: str) -> ServiceFileModified:
    return ServiceFileModified(
        str(path),
        f"{path} is not what glove daemon install wrote ({why}); not {verb} it. Put local "
        "changes in a drop-in (systemctl --user edit gloved.service), or pass --force",
    )


def _loaded(layout: Layout, runner: Runner) -> bool:
    return runner(layout.manager.show()).returncode == 0


def query_state(layout: Layout, runner: Runner) -> ServiceState:
    """Ask the service manager about the service.

    Raises:
        ServiceManagerFailed: systemd's user manager cannot be reached.
    """
    manager = layout.manager
    if isinstance(manager, SystemdUser):
        return manager.parse_state(checked(runner, manager.show()).stdout)
    result = runner(manager.show())
    if result.returncode != 0:
        return ServiceState(loaded=False, active=False, state="not loaded")
    return manager.parse_state(result.stdout)


def _activate_systemd(
    layout: Layout, runner: Runner, *, changed: bool, ran: list[Argv], dirs: list[str]
) -> ServiceState:
    manager = SystemdUser()
    if changed:
        ran.append(checked(runner, manager.reload()).argv)
    state = query_state(layout, runner)
    if state.fragment_path != str(layout.service_path):
        raise ServiceManagerFailed(
            manager.show(),
            0,
            "",
            f"the user manager loads {manager.service} from {state.fragment_path or 'nowhere'}, "
            f"not from {layout.service_path}: does systemd --user run with the same "
            "XDG_CONFIG_HOME as this shell, or does a packaged unit shadow this one?",
        )
    if state.active and state.enabled == "enabled":
        return state
    wants = layout.service_path.parent / WANTS_DIR_NAME
    had_wants = wants.exists()
    ran.append(checked(runner, manager.activate()).argv)
    if not had_wants and wants.is_dir():
        dirs.append(str(wants))
    return query_state(layout, runner)


def _activate_launchd(
    layout: Layout, runner: Runner, *, changed: bool, ran: list[Argv]
) -> ServiceState:
    manager = layout.manager
    loaded = _loaded(layout, runner)
    if changed and loaded:
        ran.append(checked(runner, manager.reload()).argv)  # bootout: the next load reads anew
        loaded = False
    if not loaded:
        ran.append(checked(runner, manager.activate()).argv)
    return query_state(layout, runner)


def activation_commands(layout: Layout) -> list[Argv]:
    """The commands install runs after writing a new service file (for ``--dry-run``).

    launchd: a job already loaded is booted out first, so the bootstrap reads the new plist.
    """
    manager = layout.manager
    if isinstance(manager, SystemdUser):
        return [manager.reload(), manager.activate()]
    return [manager.activate()]


def install(
    *,
    force: bool = False,
    dry_run: bool = False,
    layout: Layout | None = None,
    runner: Runner = run_tool,
) -> InstallReport | InstallPlan:
    """Install ``gloved`` as this user's service and start it (or, with ``dry_run``, say how).

    Raises:
        ExecutableNotFound: no local gloved.
        UnsafeExecutable: gloved could be replaced by another user, or its path cannot be
            written into a service definition safely.
        ServiceFileModified: the service file is not what install wrote (without ``force``).
        ManifestError: the manifest or its directory is unsafe or unreadable.
        ServiceManagerFailed: systemctl/launchctl failed, or systemd loads another file.
        TemplateError: a template is missing or renders wrongly.
    """
    layout = layout or default_layout()
    executable = resolve_gloved()
    check_executable(executable)
    content = render_files(layout, executable).encode()
    path = layout.service_path
    old = read_manifest(layout.manifest_path)
    kind, why = classify(path, content, _recorded_sha(old, path))
    if kind == "foreign" and not force:
        raise _refuse_foreign(path, why, "overwriting")
    changed = kind != "same"
    if dry_run:
        dirs = list(old.directories) if old else []
        for directory in (layout.manifest_path.parent, path.parent):
            dirs += [str(d) for d in missing_dirs(directory) if str(d) not in dirs]
        manifest = _manifest_for(layout, executable, content, dirs)
        return InstallPlan(
            platform=layout.platform,
            service=layout.manager.service,
            executable=str(executable),
            files=[
                ServiceFile(str(path), content.decode()),
                ServiceFile(str(layout.manifest_path), encode_manifest(manifest).decode()),
            ],
            commands=activation_commands(layout),
        )
    if layout.platform == "systemd":
        require_user_manager(runner, os.environ)  # before anything is written
    state_dir = layout.manifest_path.parent
    created = [str(p) for p in make_dirs(state_dir, PRIVATE_DIR_MODE)]
    check_state_dir(state_dir)
    with exclusive(state_dir):
        created += [str(p) for p in make_dirs(path.parent, PUBLIC_DIR_MODE)]
        dirs = [*(old.directories if old else []), *created]
        if changed:
            atomic_write(path, content, SERVICE_FILE_MODE)
        wrote_manifest = _write_manifest(layout, executable, content, dirs)
        ran: list[Argv] = []
        if layout.platform == "systemd":
            before = len(dirs)
            state = _activate_systemd(layout, runner, changed=changed, ran=ran, dirs=dirs)
            if len(dirs) != before:  # enable made default.target.wants/: record it too
                _write_manifest(layout, executable, content, dirs)
        else:
            state = _activate_launchd(layout, runner, changed=changed, ran=ran)
    action = _ACTION_FOR[kind]
    notes = []
    if changed and kind != "absent" and state.active:
        notes.append("the running gloved still runs the old definition: glove daemon restart")
    return InstallReport(
        platform=layout.platform,
        service=layout.manager.service,
        path=str(path),
        executable=str(executable),
        changed=changed or wrote_manifest or bool(ran) or bool(created),
        files=[FileChange(str(path), action)],
        commands=ran,
        state=state,
        notes=notes,
    )


def _write_manifest(layout: Layout, executable: Path, content: bytes, dirs: list[str]) -> bool:
    """Write the manifest unless it already says exactly this; True if it was written."""
    data = encode_manifest(_manifest_for(layout, executable, content, dirs))
    with contextlib.suppress(FileNotFoundError):
        if layout.manifest_path.read_bytes() == data:
            return False
    atomic_write(layout.manifest_path, data, MANIFEST_MODE)
    return True


def uninstall(
    *, force: bool = False, layout: Layout | None = None, runner: Runner = run_tool
) -> UninstallReport:
    """Stop and remove the service: exactly what install wrote (the manifest's files).

    Raises:
        ServiceFileModified: a service file is not what install wrote (without ``force``).
        ManifestError: the manifest is unsafe or unreadable.
        ServiceManagerFailed: the service manager failed (without ``force``).
    """
    layout = layout or default_layout()
    manifest = read_manifest(layout.manifest_path)
    service = layout.manager.service
    paths = [Path(e.path) for e in manifest.files] if manifest else [layout.service_path]
    kinds = [classify(p, None, _recorded_sha(manifest, p)) for p in paths]
    if manifest is None and kinds[0][0] == "absent":
        return UninstallReport(layout.platform, service, False, [], [], [], ["not installed"])
    for p, (kind, why) in zip(paths, kinds, strict=True):
        if kind == "foreign" and not force:
            raise _refuse_foreign(p, why, "removing")
    ran: list[Argv] = []
    notes: list[str] = []
    manager_up = True
    if layout.platform == "systemd":
        try:
            require_user_manager(runner, os.environ)
        except NoUserManager:
            # Nothing runs the service, so there is nothing to stop: the files go anyway.
            manager_up = False
            notes.append("no systemd user manager: nothing to stop; the files are removed")

    def tolerate(argv: Argv) -> None:
        if not manager_up:
            return
        try:
            ran.append(checked(runner, argv).argv)
        except ServiceManagerFailed as exc:
            if not force:
                raise
            notes.append(f"ignored (--force): {exc}")

    state_dir = layout.manifest_path.parent
    files: list[FileChange] = []
    with exclusive(state_dir) if state_dir.is_dir() else contextlib.nullcontext():
        if any(kind != "absent" for kind, _ in kinds):
            tolerate(layout.manager.deactivate())
        for p, (kind, _why) in zip(paths, kinds, strict=True):
            if kind != "absent":
                p.unlink()
                fsync_dir(p.parent)
            files.append(FileChange(str(p), "absent" if kind == "absent" else "removed"))
        if layout.platform == "systemd":
            tolerate(SystemdUser().reload())
        if manifest is not None:
            layout.manifest_path.unlink()
            fsync_dir(state_dir)
            files.append(FileChange(str(layout.manifest_path), "removed"))
    removed = remove_empty_dirs(manifest.directories if manifest else [])
    return UninstallReport(layout.platform, service, True, files, removed, ran, notes)


def control(
    action: Action, *, layout: Layout | None = None, runner: Runner = run_tool
) -> ServiceState:
    """Start, stop or restart the installed service; return its state afterwards.

    Raises:
        ServiceError: the service is not installed.
        ServiceManagerFailed: the service manager refused.
    """
    layout = layout or default_layout()
    if not layout.service_path.exists():
        raise ServiceError(f"{layout.manager.service} is not installed: glove daemon install")
    if layout.platform == "systemd":
        require_user_manager(runner, os.environ)
    checked(runner, layout.manager.action(action))
    return query_state(layout, runner)


def status(*, layout: Layout | None = None, runner: Runner = run_tool) -> DaemonStatus:
    """Report the service's installation, the manager's view of it, and whether gloved answers.

    Never raises for what it finds: an unreachable manager or daemon is part of the report.
    """
    from glove.control import ControlError, RemoteError, call

    layout = layout or default_layout()
    path = layout.service_path
    try:
        manifest = read_manifest(layout.manifest_path)
    except ServiceError:
        manifest = None
    executable: Path | None
    try:
        executable = resolve_gloved()
        wanted: bytes | None = render_files(layout, executable).encode()
    except ServiceError:
        executable, wanted = None, None
    kind, _why = classify(path, wanted, _recorded_sha(manifest, path))
    manager: ServiceState | None = None
    manager_error = None
    try:
        if layout.platform == "systemd":
            require_user_manager(runner, os.environ)
        manager = query_state(layout, runner)
    except ServiceManagerFailed as exc:
        manager_error = str(exc)
    sock = layout.runtime_dir / "gloved.sock"
    try:
        call(sock, "health", timeout=CONTROL_PROBE_DEADLINE_S)
        reachable = True
    except ControlError as exc:
        reachable = isinstance(exc, RemoteError)  # it answered, if only to refuse
    except OSError:
        reachable = False
    return DaemonStatus(
        platform=layout.platform,
        service=layout.manager.service,
        path=str(path),
        installed=kind != "absent",
        modified=kind == "foreign",
        current=kind == "same",
        executable=None if executable is None else str(executable),
        manager=manager,
        manager_error=manager_error,
        socket=str(sock),
        reachable=reachable,
    )


def logs_argv(lines: int, *, follow: bool, layout: Layout | None = None) -> Argv:
    """The command that shows the service's log (run by the CLI with the terminal attached)."""
    return (layout or default_layout()).manager.logs(lines, follow=follow)
