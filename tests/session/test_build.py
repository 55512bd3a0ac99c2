"""The one session builder (issue 21, item 3): every session tree in the code is built by
``glove.session``'s builder from one description, in one fixed order, and ``glove.session``
imports nothing from the CLI packages.

The order is checked on real parts (a real mediation built from a real configuration, real
egress rules, a real socketpair and guest directory), none of them started. That ``glove
run``, a proxied ``glove exec`` and gloved use the builder, and nothing else builds a session
tree, is read from the source (every call, function-level ones included); what their trees
do is what the run, egress and gloved suites check end to end.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

import glove
from glove.actors import Actor
from glove.container import SandboxSpec
from glove.egress import RuleSet
from glove.mcp import load_config
from glove.session import (
    SandboxActor,
    SandboxLaunch,
    SessionDescription,
    SessionParts,
    build_session,
    open_session,
    session_children,
)
from tests._ast import parse as parse_source

SRC = Path(glove.__file__).resolve().parent
#: The modules that run a session, and the builder calls each must make.
CALLERS = {
    "run/_agent.py": {"open_session", "run_foreground"},  # glove run
    "run/_proxied.py": {"open_session", "run_foreground"},  # glove exec --network proxy
    "session/_mediated.py": {"open_session"},  # gloved: its tools and network
    "session/_driver.py": {"build_session"},  # gloved: the contained tree, beside the driver
}
#: What makes a session's parts, and the only modules allowed to call it.
CONSTRUCTORS = {
    "session_tree": {"session/_build.py"},
    "SandboxActor": {"session/_build.py"},
    "EgressProxy": {"session/_wiring.py"},
    "AgentChannel": {"session/_wiring.py"},
    "all_started": {"session/_wiring.py"},
    "close_once_launched": {"session/_wiring.py"},
}
#: The CLI packages the session core must never import.
CLI_PACKAGES = ("glove.run", "glove.cli", "glove.daemon", "glove.host")
#: An MCP configuration with one upstream (never started here) and the built-in policy.
CONFIG = """policy = "allow-all"
audit = "audit.log"
[upstreams.echo]
command = ["/bin/true"]
"""


class _Front(Actor):
    """A front actor the caller owns (gloved's evaluator or drain)."""

    async def handle(self, msg: object) -> object:
        return await super().handle(msg)


def _launch() -> SandboxLaunch:
    return SandboxLaunch(SandboxSpec(argv=("/bin/true",)), on_output=lambda _s, _d: None)


@pytest.fixture
def config_path(tmp_path: Path) -> str:
    """The MCP configuration, written."""
    path = tmp_path / "glove.toml"
    path.write_text(CONFIG)
    return str(path)


async def _parts(description: SessionDescription) -> SessionParts:
    return await open_session(description)


@pytest.mark.parametrize(
    ("tools", "network", "expected"),
    [
        (False, False, ["sandbox"]),
        (True, False, ["mcp", "channel", "sandbox"]),
        (False, True, ["audit", "egress", "sandbox"]),
        (True, True, ["mcp", "channel", "egress", "sandbox"]),
    ],
)
async def test_children_come_in_one_order_for_every_description(
    tmp_path: Path, config_path: str, tools: bool, network: bool, expected: list[str]
) -> None:
    """With and without tools and a network, the children are the front actors, then mcp,
    channel, audit, egress, and the sandbox last, which waits on the one readiness barrier."""
    description = SessionDescription(
        "t1",
        mcp=load_config(config_path) if tools else None,
        rules=RuleSet.load(("example.org:443",), ()) if network else None,
        audit_path=str(tmp_path / "egress.log"),
    )
    parts = await _parts(description)
    try:
        names = [child.name for child in parts.children(_launch())]
        assert names == expected
        front = [_Front("evaluator"), _Front("drain")]
        specs = session_children(_launch(), parts=parts, front=front)
        assert [child.name for child in specs] == ["evaluator", "drain", *expected]
        sandbox = specs[-1].start()
        assert isinstance(sandbox, SandboxActor)
        ready = parts.wiring.ready if parts.wiring is not None else None
        assert sandbox._start_after is ready
        assert (parts.guest(("agent",)) is None) == (not tools and not network)
        tree = build_session("t1", _launch(), parts=parts, front=front)
        assert tree.name == "session-t1"
        assert list(tree._specs) == ["evaluator", "drain", *expected]
    finally:
        await parts.close()
    if parts.private is not None:
        assert not parts.private.exists()  # the guest directory goes with the parts


async def test_a_network_without_tools_needs_its_audit_log() -> None:
    """The egress-only path refuses to build without an audit log (no record, no
    connection): there is no second, log-less one."""
    with pytest.raises(ValueError, match="audit log"):
        await open_session(SessionDescription("t2", rules=RuleSet.load(("example.org:443",), ())))


def _calls(path: Path) -> Iterator[str]:
    """The names every call in ``path`` calls (``f(...)`` and ``x.f(...)``), nested included."""
    for node in ast.walk(parse_source(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                yield func.id
            elif isinstance(func, ast.Attribute):
                yield func.attr


@pytest.mark.parametrize("module", sorted(CALLERS))
def test_each_session_runner_calls_the_one_builder(module: str) -> None:
    """glove run, a proxied glove exec and gloved each get their tree from the builder."""
    called = set(_calls(SRC / module))
    assert CALLERS[module] <= called
    assert "session_tree" not in called
    assert "SandboxActor" not in called


def test_nothing_else_builds_a_session_part() -> None:
    """Outside the builder nothing constructs a session's sandbox actor, proxy, channel or
    tree, or waits on a readiness barrier of its own."""
    found: dict[str, set[str]] = {name: set() for name in CONSTRUCTORS}
    for path in SRC.rglob("*.py"):
        module = path.relative_to(SRC).as_posix()
        for name in _calls(path):
            if name in found:
                found[name].add(module)
    assert found == CONSTRUCTORS


def test_the_session_core_imports_no_cli_package() -> None:
    """No module of glove.session imports glove.run, glove.cli, glove.daemon or glove.host,
    directly (imports inside functions and under TYPE_CHECKING counted) or through another
    package."""
    graph = grimp.build_graph("glove")
    modules = graph.find_children("glove.session") | {"glove.session"}
    direct = {
        (module, imported)
        for module in modules
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith(CLI_PACKAGES)
    }
    assert direct == set()
    for package in CLI_PACKAGES:
        assert not graph.chain_exists("glove.session", package, as_packages=True)
