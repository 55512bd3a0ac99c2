"""The light commands load only their own modules (issue 22), and say what typer would say.

``glove --version``, ``--help``, ``capabilities`` and ``session status`` run in a subprocess
under ``-X importtime``, which names every module the run imports, and report ``sys.modules``
as they exit (importtime does not see a module ``importlib.import_module`` loads, as the
packages' lazy names do); each may load only the ``glove`` modules listed here and no
third-party package: never typer, click, rich or pydantic, msgspec, asyncio, the sandbox,
the session, MCP, daemon or host stacks, and the one-call commands not even ``dataclasses``
or ``pathlib`` (docs/decisions/0049). Their output, stderr and exit code are
compared with what typer's app prints for the same arguments, so the fast path
(``glove.cli._fast``) cannot drift. Nothing here is timed: ``benchmarks/cli/bench.py`` measures.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.session._gloved import Gloved, plan_text

#: The console script people run (``python -m glove`` would add runpy to what is loaded).
GLOVE = Path(sys.executable).parent / "glove"
#: The same arguments through typer's app, never through the fast path.
VIA_TYPER = (
    "import sys; from glove.cli import build_app; from glove.cli._main import _one_usage_code; "
    "_one_usage_code(); build_app()(sys.argv[1:], prog_name='glove')"
)

#: Every glove module ``--version`` and ``--help`` may load.
LIGHT = frozenset({
    "glove", "glove._version", "glove.errors", "glove.exits",
    "glove.cli", "glove.cli._main", "glove.cli._fast", "glove.cli._echo",
})  # fmt: skip
#: Every glove module a one-call control client command may load: the JSON-only one-shot
#: call (glove.control.call_once) and what it reads, never the typed clients or their codec.
CLIENT = LIGHT | {
    "glove._lazy", "glove.cli._status",
    "glove.config", "glove.config._runtime_rule", "glove.config.errors",
    "glove.control", "glove.control._oneshot", "glove.control._client_base",
    "glove.control._address", "glove.control._secret", "glove.control.errors",
    "glove.protocol", "glove.protocol._frames", "glove.protocol._json",
    "glove.protocol._limits", "glove.protocol._reply", "glove.protocol.errors",
}  # fmt: skip
#: What the one-call commands leave out besides NEVER: the codec and the standard library
#: modules that cost them most (decision 0049's measurements).
NOT_FOR_ONE_CALL = ("msgspec", "dataclasses", "inspect", "pathlib", "glove.protocol.control")
#: The library's stacks, then every package none of these commands may load (named, so a
#: failure says which one came back).
STACKS = (
    "glove.container", "glove.session", "glove.mcp", "glove.daemon", "glove.host",
    "glove.run", "glove.actors", "glove.journal", "glove.egress", "glove.policy",
)  # fmt: skip
NEVER = ("typer", "click", "rich", "pydantic", "asyncio", *STACKS)
#: Run as the console script runs, then write ``sys.modules`` to the file named in argv[1].
WITH_MODULES = (
    "import os, sys; out, script = sys.argv[1], sys.argv[2]; sys.argv = sys.argv[2:]\n"
    "def record(): open(out, 'w').write('\\n'.join(sorted(sys.modules)))\n"
    "def record_and_exit(code, _exit=os._exit): record(); _exit(code)\n"
    "os._exit = record_and_exit  # glove exec ends without the interpreter's teardown\n"
    "try:\n"
    "    exec(compile(open(script).read(), script, 'exec'), {'__name__': '__main__'})\n"
    "finally:\n"
    "    record()\n"
)


def _imported(stderr: str) -> set[str]:
    """The modules ``-X importtime`` reports in ``stderr``."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and not line.endswith("imported package")
    }


def _baseline() -> set[str]:
    """What the interpreter itself loads for ``python -c pass`` (site hooks included)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "pass"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return _imported(done.stderr)


def _third_party(modules: set[str]) -> set[str]:
    """The top-level packages outside the standard library and glove that ``modules`` name
    (and exist: importtime also names an import that failed, like ``copy``'s ``org``)."""
    tops = {name.partition(".")[0] for name in modules - _baseline()}
    return {
        top
        for top in tops
        if top not in sys.stdlib_module_names
        and top not in ("glove", "__main__")
        and importlib.util.find_spec(top) is not None
    }


def _run(
    argv: list[str], env: dict[str, str], modules_file: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``glove ARGV`` under ``-X importtime``: the result (importtime lines removed) and the
    modules it loaded (those importtime names and those in ``sys.modules`` at its exit)."""
    assert GLOVE.exists(), f"{GLOVE}: the console script is installed with the package"
    if modules_file is None:
        modules_file = Path(env["HOME"]) / "modules.txt"
    modules_file.unlink(missing_ok=True)
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            WITH_MODULES,
            str(modules_file),
            str(GLOVE),
            *argv,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    modules = _imported(done.stderr) | set(modules_file.read_text().split())
    done.stderr = "".join(
        line
        for line in done.stderr.splitlines(keepends=True)
        if not line.startswith("import time:")
    )
    return done, modules


def _via_typer(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", VIA_TYPER, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _within(modules: set[str], packages: tuple[str, ...]) -> set[str]:
    """The modules of ``modules`` that are one of ``packages`` or inside one."""
    return {
        name for name in modules for top in packages if name == top or name.startswith(top + ".")
    }


def _assert_light(
    modules: set[str], allowed: frozenset[str], never: tuple[str, ...] = NEVER
) -> None:
    ours = {name for name in modules if name.partition(".")[0] == "glove"}
    assert ours - allowed == set()
    assert _within(modules, never) == set()
    assert _third_party(modules) == set()


def _assert_same(
    fast: subprocess.CompletedProcess[str], typer: subprocess.CompletedProcess[str]
) -> None:
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        typer.returncode,
        typer.stdout,
        typer.stderr,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A home of its own (no gloved runs in it) and an 80-column terminal width."""
    home = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "GLOVE_"))}
    home.update(
        HOME=str(tmp_path),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_RUNTIME_DIR=str(tmp_path / "run"),
        COLUMNS="80",
    )
    return home


@pytest.fixture(scope="module")
def gloved(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gloved]:
    """A set-up home with a running gloved."""
    home = Gloved(Path(os.path.realpath(tmp_path_factory.mktemp("gloved"))))
    home.setup()
    home.start()
    try:
        yield home
    finally:
        home.stop()


def test_version_loads_no_third_party_module(env: dict[str, str]) -> None:
    """``glove --version`` prints the version from the cli package and the version module
    alone: no typer, nothing third-party."""
    done, modules = _run(["--version"], env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("glove ")
    _assert_light(modules, LIGHT)
    _assert_same(done, _via_typer(["--version"], env))


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_loads_no_third_party_module_and_is_typers_text(
    env: dict[str, str], flag: str
) -> None:
    """``glove --help`` at 80 columns loads nothing third-party and prints exactly the help
    typer renders for the app as it is registered (a new or reworded command fails here)."""
    done, modules = _run([flag], env)
    _assert_light(modules, LIGHT)
    _assert_same(done, _via_typer([flag], env))


def test_help_on_a_narrow_terminal_is_typers_own(env: dict[str, str]) -> None:
    """On a terminal narrower than 80 columns typer lays the help out (the kept text is for
    80), so the fast path steps aside rather than print a layout of the wrong width; typer's
    help imports every command module, and still none of the library's stacks."""
    narrow = {**env, "COLUMNS": "60"}
    done, modules = _run(["--help"], narrow)
    assert "typer" in {name.partition(".")[0] for name in modules}
    assert _within(modules, STACKS) == set()
    _assert_same(done, _via_typer(["--help"], narrow))


@pytest.mark.parametrize(
    "argv",
    [
        ["capabilities"],
        ["capabilities", "--json"],
        ["session", "status", "s-1", "--json"],
        ["session", "status", "--runtime-dir", "{tmp}/nowhere", "s-1"],
    ],
)
def test_client_commands_without_a_gloved_load_only_the_client(
    env: dict[str, str], tmp_path: Path, argv: list[str]
) -> None:
    """With no gloved listening, ``capabilities`` and ``session status`` load the one-shot
    JSON call (nothing third-party, no msgspec, dataclasses or pathlib), exit 69 and print
    typer's very message."""
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    done, modules = _run(args, env)
    assert done.returncode == 69, done.stderr
    _assert_light(modules, CLIENT, (*NEVER, *NOT_FOR_ONE_CALL))
    _assert_same(done, _via_typer(args, env))


def test_client_commands_against_a_running_gloved(gloved: Gloved) -> None:
    """Against a real gloved, ``capabilities`` (report and JSON) and ``session status`` (of
    a session that ran, and of one that does not exist) load only the client and print what
    typer prints, exit codes included."""
    created = gloved.call("session.create", {"plan": plan_text("ok")})
    gloved.wait_terminal(created["session_id"])
    env = {**gloved.env, "COLUMNS": "80"}
    runtime = ["--runtime-dir", str(gloved.runtime)]
    cases = [
        (["capabilities", *runtime], 0),
        (["capabilities", "--json"], 0),
        (["session", "status", created["session_id"]], 0),
        (["session", "status", *runtime, created["session_id"], "--json"], 0),
        (["session", "status", "s-00000000000000000000000000"], 1),
    ]
    for argv, code in cases:
        done, modules = _run(argv, env)
        assert done.returncode == code, (argv, done.stderr)
        _assert_light(modules, CLIENT, (*NEVER, *NOT_FOR_ONE_CALL))
        _assert_same(done, _via_typer(argv, env))
    done, _ = _run(["session", "status", created["session_id"], "--json"], env)
    assert json.loads(done.stdout)["state"] == "terminal"


@pytest.mark.parametrize(
    "argv",
    [
        ["session", "status"],
        ["session", "status", "a", "b"],
        ["session", "status", "a", "--bogus"],
        ["session", "status", "a", "--runtime-dir"],
        ["capabilities", "extra"],
        ["capabilities", "-h"],
        ["--version", "capabilities"],
    ],
)
def test_what_the_fast_path_does_not_understand_goes_to_typer(
    env: dict[str, str], argv: list[str]
) -> None:
    """An argument list the fast path does not parse completely is typer's: the same usage
    error (or help) and exit code as typer's app gives."""
    done, modules = _run(argv, env)
    assert "typer" in {name.partition(".")[0] for name in modules}
    _assert_same(done, _via_typer(argv, env))


#: Every glove module ``glove exec -- /bin/true`` may load: the CLI's own parser, the run's
#: options and spec, the container's spec, profile and limits, and the blocking launch path
#: (``_supervise``, and ``_launch_guard``, which ``launch`` asks whether this process may
#: clone): never the asyncio shell, the launcher client or ``--dry-run``'s description.
EXEC = LIGHT | {
    "glove._lazy", "glove.usage", "glove.cli._exec",
    "glove.run", "glove.run._egress", "glove.run._exec", "glove.run._options",
    "glove.run._prepare", "glove.run._report", "glove.run._terminal",
    "glove.container", "glove.container._backend", "glove.container._cgroupfs",
    "glove.container._denials", "glove.container._description", "glove.container._filter",
    "glove.container._limits", "glove.container._monitor", "glove.container._observe",
    "glove.container._profile", "glove.container._protect", "glove.container._resolv",
    "glove.container._result", "glove.container._socket_gate", "glove.container._spec",
    "glove.container._status", "glove.container._use", "glove.container._verdict",
    "glove.container.errors", "glove.container.linux",
    "glove.container.linux._cgroup_v2", "glove.container.linux._cgroups",
    "glove.container.linux._events", "glove.container.linux._jobs",
    "glove.container.linux._launch", "glove.container.linux._launch_guard",
    "glove.container.linux._mounts",
    "glove.container.linux._pty", "glove.container.linux._reaper",
    "glove.container.linux._retained", "glove.container.linux._seccomp",
    "glove.container.linux._seccomp_packed", "glove.container.linux._supervise",
    "glove.container.linux._syscalls",
    "glove.container.linux._unix_gate",
}  # fmt: skip
#: What ``glove exec`` must never load: the stacks it has no use for, tomllib (the embedded
#: profiles ship decoded), ``ctypes.util`` and its ``subprocess`` (libseccomp by soname),
#: pyseccomp and hashlib (the filters ship compiled and are verified with ``_sha256``),
#: shutil (argparse's formatter is sized without it).
NOT_FOR_EXEC = (
    "typer", "click", "rich", "pydantic", "asyncio", "tomllib", "ctypes.util", "subprocess",
    "pyseccomp", "hashlib", "shutil",
    "glove.session", "glove.mcp", "glove.daemon", "glove.control", "glove.journal",
    "glove.host", "glove.actors", "glove.egress", "glove.policy", "glove.agents",
    "glove.container._describe", "glove.container.linux._describe",
    "glove.container.linux._async", "glove.container.linux._async_run",
    "glove.container.linux._launcher_client", "glove.container.linux._launcher",
)  # fmt: skip


def test_exec_loads_only_its_launch_path(env: dict[str, str], tmp_path: Path) -> None:
    """``glove exec -- /bin/true`` (default profile, output not a terminal) loads the
    modules of its own path and, outside the standard library, msgspec only (imported
    without ``typing_extensions``; the seccomp filters ship compiled):
    no typer, no asyncio, no session, MCP, daemon, control or journal stack."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    at_exit = tmp_path / "modules.txt"
    argv = ["exec", "--workspace", str(workspace), "--", "/bin/true"]
    done, modules = _run(argv, env, at_exit)
    assert done.returncode == 0, done.stderr
    ours = {name for name in modules if name.partition(".")[0] == "glove"}
    assert ours - EXEC == set()
    assert _within(modules, NOT_FOR_EXEC) == set()
    # importtime names typing_extensions too: msgspec asked for it and was refused
    assert _third_party(modules) - {"typing_extensions"} == {"msgspec"}
    assert "typing_extensions" not in at_exit.read_text().split()
