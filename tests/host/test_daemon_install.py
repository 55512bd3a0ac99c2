"""glove daemon without a service manager: what it renders, where, and what it refuses.

The generated unit is checked by systemd's own verifier, the plist by plistlib against
launchd.plist(5)'s keys; the run under a real systemd --user is test_daemon_systemd.py.
"""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from glove.host import (
    LAUNCHD_LABEL,
    ExecutableNotFound,
    InstallPlan,
    ServiceManagerFailed,
    TemplateError,
    UnsafeExecutable,
    check_executable,
    default_layout,
    install,
    render_launchd_plist,
    render_systemd_unit,
    resolve_gloved,
    template_text,
)
from glove.host._service_files import atomic_write, classify, sha256
from glove.host._service_managers import ToolResult, parse_timespan
from glove.host._service_units import render, unit_word

REPO = Path(__file__).resolve().parents[2]
GLOVED = Path(sys.executable).parent / "gloved"
#: The gloved.toml a unit is bound to in these tests.
CONFIG = Path("/home/u/.config/glove/gloved.toml")

# launchd.plist(5): the keys a job may use (those glove's template could reach for).
LAUNCHD_KEYS = {
    "Label", "Disabled", "UserName", "GroupName", "inetdCompatibility", "LimitLoadToHosts",
    "LimitLoadFromHosts", "LimitLoadToSessionType", "Program", "ProgramArguments",
    "EnableGlobbing", "EnableTransactions", "OnDemand", "KeepAlive", "RunAtLoad", "RootDirectory",
    "WorkingDirectory", "EnvironmentVariables", "Umask", "TimeOut", "ExitTimeOut",
    "ThrottleInterval", "InitGroups", "WatchPaths", "QueueDirectories", "StartOnMount",
    "StartInterval", "StartCalendarInterval", "StandardInPath", "StandardOutPath",
    "StandardErrorPath", "Debug", "WaitForDebugger", "SoftResourceLimits", "HardResourceLimits",
    "Nice", "ProcessType", "AbandonProcessGroup", "LowPriorityIO", "LowPriorityBackgroundIO",
    "LaunchOnlyOnce", "MachServices", "Sockets",
}  # fmt: skip
LAUNCHD_KEEPALIVE_KEYS = {"SuccessfulExit", "NetworkState", "PathState", "OtherJobEnabled",
                          "Crashed"}  # fmt: skip
LAUNCHD_RESOURCE_KEYS = {"Core", "CPU", "Data", "FileSize", "MemoryLock", "NumberOfFiles",
                         "NumberOfProcesses", "ResidentSetSize", "Stack"}  # fmt: skip


def _verify(unit_text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run systemd-analyze --user verify on ``unit_text`` saved as gloved.service."""
    unit = tmp_path / "gloved.service"
    unit.write_text(unit_text)
    runtime = tmp_path / "xdg-run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return subprocess.run(
        ["systemd-analyze", "--user", "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SYSTEMD_LOG_COLOR": "0"},
    )


def test_the_generated_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    """systemd's verifier accepts the rendered unit without a single warning."""
    out = _verify(render_systemd_unit(GLOVED, CONFIG), tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""


def test_the_verifier_would_catch_a_broken_unit(tmp_path: Path) -> None:
    """The same check fails on a misspelt directive and on a missing executable, so the
    passing verdict above means something."""
    good = render_systemd_unit(GLOVED, CONFIG)
    typo = _verify(good.replace("KillMode=mixed", "KillMode=mixd"), tmp_path)
    assert "Failed to parse kill mode" in typo.stderr
    missing = _verify(render_systemd_unit(tmp_path / "no" / "gloved", CONFIG), tmp_path)
    assert missing.returncode != 0
    assert "is not executable" in missing.stderr


def test_a_path_with_spaces_is_quoted_and_verifies(tmp_path: Path) -> None:
    """An executable under a directory with a space is written as one quoted word."""
    spaced = tmp_path / "my tools" / "gloved"
    spaced.parent.mkdir()
    spaced.symlink_to(GLOVED)
    config = tmp_path / "my config" / "gloved.toml"
    unit = render_systemd_unit(spaced, config)
    assert f'ExecStart="{spaced}" --runtime-dir=%t/glove --config="{config}"' in unit
    out = _verify(unit, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""


UNSAFE_PATHS = ["/a/%h/gloved", "/a/$HOME/gloved", "/a/b\nExecStartPre=/x", '/a/"q"/gloved',
                "/a/b\\c", "/a;b/gloved", "relative/gloved"]  # fmt: skip


@pytest.mark.parametrize("bad", UNSAFE_PATHS)
def test_paths_a_unit_file_would_interpret_are_refused(bad: str) -> None:
    """A specifier, variable, quote, escape, separator or newline in the path is refused:
    it would change the unit rather than name a file."""
    with pytest.raises(UnsafeExecutable):
        unit_word(Path(bad))


def test_templates_are_rendered_from_deploy_with_exactly_their_tokens() -> None:
    """The package reads the one copy of each template in deploy/, and a template that
    gained or lost a token is refused."""
    for name in ("systemd/gloved.service", "launchd/gloved.plist"):
        packaged = Path(str(resources.files("glove.host")))
        assert (packaged / "deploy" / name).resolve() == (REPO / "deploy" / name).resolve()
        assert template_text(name) == (REPO / "deploy" / name).read_text()
    with pytest.raises(TemplateError, match="missing"):
        render("ExecStart=/bin/gloved", {"GLOVED": "x"})
    with pytest.raises(TemplateError, match="unexpected"):
        render("@GLOVED@ @EXTRA@", {"GLOVED": "x"})


def test_the_plist_round_trips_and_uses_only_launchd_keys(tmp_path: Path) -> None:
    """The LaunchAgent parses with plistlib, round-trips, uses only documented keys, keeps
    gloved alive on failure, and carries an awkward path intact."""
    exe = Path("/Users/a & b/<venv>/bin/gloved")
    data = render_launchd_plist(
        exe, Path("/tmp/glove-501"), Path("/Users/a/Library/Logs/g.log"), CONFIG
    )
    plist = plistlib.loads(data)
    assert plistlib.loads(plistlib.dumps(plist)) == plist
    assert set(plist) <= LAUNCHD_KEYS
    assert plist["Label"] == LAUNCHD_LABEL
    assert plist["ProgramArguments"] == [
        str(exe), "--runtime-dir", "/tmp/glove-501", "--config", str(CONFIG)
    ]  # fmt: skip
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert set(plist["KeepAlive"]) <= LAUNCHD_KEEPALIVE_KEYS
    assert set(plist["SoftResourceLimits"]) | set(plist["HardResourceLimits"]) <= (
        LAUNCHD_RESOURCE_KEYS
    )
    assert plist["Umask"] == 0o077
    assert plist["ProcessType"] in {"Background", "Standard", "Adaptive", "Interactive"}
    with pytest.raises(UnsafeExecutable):
        render_launchd_plist(Path("/a/\x01/gloved"), Path("/tmp"), Path("/tmp/l"), CONFIG)


def test_launchd_layout_and_dry_run(tmp_path: Path) -> None:
    """On the launchd layout install --dry-run would write the plist into LaunchAgents
    and load it with launchctl bootstrap gui/<uid>, and writes nothing."""
    layout = default_layout("launchd", environ={"HOME": str(tmp_path)})
    plan = install(dry_run=True, layout=layout)
    assert isinstance(plan, InstallPlan)
    paths = [f.path for f in plan.files]
    assert paths[0] == str(tmp_path / "Library/LaunchAgents/org.glove.gloved.plist")
    assert plan.commands == [["launchctl", "bootstrap", f"gui/{os.getuid()}", paths[0]]]
    assert plistlib.loads(plan.files[0].content.encode())["Label"] == LAUNCHD_LABEL
    assert list(tmp_path.iterdir()) == []


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "glove", "daemon", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd="/",
    )


def _home_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    run = tmp_path / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    return {**env, "HOME": str(home), "XDG_RUNTIME_DIR": str(run), **extra}


def test_dry_run_prints_every_file_and_writes_nothing(tmp_path: Path) -> None:
    """--dry-run --json lists each file with its full content (the unit and the manifest)
    and the commands, and the home directory stays empty."""
    env = _home_env(tmp_path)
    out = _cli("install", "--dry-run", "--json", env=env)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    home = Path(env["HOME"])
    unit, manifest = plan["files"]
    assert unit["path"] == str(home / ".config/systemd/user/gloved.service")
    assert unit["content"] == render_systemd_unit(
        resolve_gloved(), home / ".config/glove/gloved.toml"
    )  # bound to the gloved.toml glove setup makes for this user
    assert manifest["path"] == str(home / ".local/state/glove/daemon-install.json")
    recorded = json.loads(manifest["content"])
    assert recorded["files"] == [{"path": unit["path"], "sha256": sha256(unit["content"].encode())}]
    assert str(home / ".config/systemd/user") in recorded["directories"]
    assert plan["commands"][-1] == ["systemctl", "--user", "enable", "--now", "gloved.service"]
    assert list(home.iterdir()) == []
    human = _cli("install", "--dry-run", env=env)
    assert f"==> {unit['path']}" in human.stdout
    assert "ExecStart=" in human.stdout


def test_without_a_user_manager_install_writes_nothing_and_says_how(tmp_path: Path) -> None:
    """With no systemd user manager (this host's real systemctl --user, no login session),
    install refuses before writing anything, in one line naming `loginctl enable-linger` and
    a login session (exit 1, no traceback); status then says not installed (exit 4)."""
    env = _home_env(tmp_path)
    home = Path(env["HOME"])
    probe = subprocess.run(["systemctl", "--user", "is-system-running"], env=env,
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    if probe.stdout.strip() in ("running", "degraded"):
        pytest.skip("this host gives the test a user manager")
    out = _cli("install", env=env)
    assert out.returncode == 1, out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert "no systemd user manager" in out.stderr
    assert "loginctl enable-linger" in out.stderr
    assert "login session" in out.stderr
    assert "Traceback" not in out.stderr
    assert list(home.iterdir()) == []  # nothing written
    status = _cli("status", env=env)
    assert status.returncode == 4, status.stdout + status.stderr
    assert "not installed" in status.stdout
    assert "no systemd user manager" in status.stdout  # why the manager is unreachable
    start = _cli("start", env=env)
    assert start.returncode == 1
    assert "not installed" in start.stderr


def test_uninstall_removes_what_install_wrote_without_a_user_manager(tmp_path: Path) -> None:
    """Files install wrote (exactly as --dry-run shows them) while a manager ran: with the
    manager gone, uninstall (no --force) removes them and leaves the home as it was."""
    env = _home_env(tmp_path)
    home = Path(env["HOME"])
    plan = json.loads(_cli("install", "--dry-run", "--json", env=env).stdout)
    for item in plan["files"]:
        path = Path(item["path"])
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.write_text(item["content"])
        path.chmod(0o600 if path.name.endswith(".json") else 0o644)
    status = _cli("status", env=env)
    assert "installed at" in status.stdout, status.stdout
    done = _cli("uninstall", env=env)
    assert done.returncode == 0, done.stderr
    assert "no systemd user manager: nothing to stop" in done.stdout
    assert "removed:" in done.stdout
    assert list(home.iterdir()) == []


def test_a_foreign_unit_is_not_overwritten(tmp_path: Path) -> None:
    """A gloved.service install never wrote (no manifest) is refused, named, and untouched."""
    env = _home_env(tmp_path)
    unit = Path(env["HOME"]) / ".config/systemd/user/gloved.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/usr/bin/gloved\n")
    for verb in ("install", "uninstall"):
        out = _cli(verb, env=env)
        assert out.returncode == 1
        assert "install has no record of it" in out.stderr
        assert unit.read_text() == "[Service]\nExecStart=/usr/bin/gloved\n"


def test_an_executable_others_could_replace_is_refused(tmp_path: Path) -> None:
    """gloved in a directory another user can write, or owned by another user, is refused;
    one in a root-owned venv under a sticky world-writable directory is accepted."""
    shared = tmp_path / "shared"
    shared.mkdir()
    exe = shared / "gloved"
    shutil.copy(GLOVED, exe)
    shared.chmod(0o777)
    tmp_path.chmod(0o755)
    with pytest.raises(UnsafeExecutable, match="another user could replace"):
        check_executable(exe)
    shared.chmod(0o755)
    os.chown(exe, 12345, 12345)
    with pytest.raises(UnsafeExecutable):
        check_executable(exe)
    os.chown(exe, os.getuid(), os.getgid())
    check_executable(exe)  # /tmp above is 1777: sticky, so fine


def test_gloved_is_resolved_beside_the_interpreter_then_on_path(tmp_path: Path) -> None:
    """The gloved next to the interpreter wins; else PATH; else a typed error."""
    assert resolve_gloved() == GLOVED.resolve()
    bare = tmp_path / "bin"
    bare.mkdir()
    on_path = tmp_path / "elsewhere"
    on_path.mkdir()
    (on_path / "gloved").symlink_to(GLOVED)
    found = resolve_gloved(interpreter=str(bare / "python"), search_path=str(on_path))
    assert found == GLOVED.resolve()
    with pytest.raises(ExecutableNotFound):
        resolve_gloved(interpreter=str(bare / "python"), search_path=str(bare))


def test_classify_and_atomic_write(tmp_path: Path) -> None:
    """A file is absent, exactly what install writes, what it last wrote, or foreign; an
    atomic write leaves no temporary file and the mode asked for."""
    path = tmp_path / "unit"
    assert classify(path, b"new", None)[0] == "absent"
    atomic_write(path, b"old", 0o644)
    assert (path.stat().st_mode & 0o777, [p.name for p in tmp_path.iterdir()]) == (0o644, ["unit"])
    assert classify(path, b"old", None)[0] == "same"
    assert classify(path, b"new", sha256(b"old"))[0] == "ours"
    assert classify(path, b"new", sha256(b"other")) == ("foreign", "edited since install")
    link = tmp_path / "link"
    link.symlink_to(path)
    assert classify(link, b"old", sha256(b"old"))[0] == "foreign"


def test_systemd_time_spans_and_a_failing_tool() -> None:
    """systemctl's spans parse to seconds; a failing tool's error carries its argv."""
    assert parse_timespan("1min 30s") == 90.0
    assert parse_timespan("30000000") == 30.0
    assert parse_timespan("infinity") is None
    from glove.host._service_managers import checked

    def runner(argv: object) -> ToolResult:
        return ToolResult(list(argv), 1, "", "Failed to connect to bus")  # type: ignore[call-overload]

    with pytest.raises(ServiceManagerFailed) as info:
        checked(runner, ["systemctl", "--user", "daemon-reload"])
    assert info.value.argv == ["systemctl", "--user", "daemon-reload"]
    assert "Failed to connect to bus" in str(info.value)


def test_the_example_configuration_parses_and_ships_with_the_package() -> None:
    """deploy/gloved.toml decodes strictly as gloved's configuration (what `glove setup`
    writes, rendered), with the limits and a harness it documents, and the package reaches
    the same file."""
    from glove.config import parse_gloved_config

    text = (REPO / "deploy" / "gloved.toml").read_text()
    config = parse_gloved_config(text.replace("@HOME@", "/home/alice").encode())
    assert config.limits.pids == 512
    assert config.harnesses["demo"].argv[0] == "/bin/sh"
    assert "# protected_root" in text
    assert (resources.files("glove.host") / "deploy" / "gloved.toml").read_text() == text
