"""The SBPL profile: golden vectors, well-formedness, and nothing granted outside the spec.

The profile was not executed on macOS here: these tests read it with an independent
s-expression reader and check what it allows against what the spec grants.
"""

from __future__ import annotations

import posixpath
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.container import Bind, Retained, SandboxSpec, SpecError
from glove.container.macos import render_sbpl, sbpl_string
from glove.container.macos._sbpl import (
    MACH_SERVICES,
    SYSCTL_NAMES,
    SYSCTL_PREFIXES,
    SYSTEM_DEVICES_READ,
    SYSTEM_DEVICES_RW,
    SYSTEM_READ_LITERALS,
    SYSTEM_READ_SUBPATHS,
)
from tests.container.macos.sexp import Node, ParseError, Regex, Str, Sym, parse, strings
from tests.vectors.sbpl.generate import (
    HOSTILE_BINDS,
    HOSTILE_WORKSPACE,
    SPECS,
    hostile_spec,
    vector_path,
)

TMP_PARAM = ["param", ("str", "GLOVE_PRIVATE_TMP")]
FILE_OPS = {
    "file-read*", "file-write*", "file-read-metadata", "file-read-data", "file-write-data",
    "file-ioctl", "file-map-executable",
}  # fmt: skip
WRITE_OPS = {"file-write*", "file-write-data"}
KNOWN_OPS = FILE_OPS | {
    "process-fork", "process-exec", "process-info*", "signal", "mach-lookup", "sysctl-read",
    "pseudo-tty",
}  # fmt: skip


def _canon(path: str) -> str:
    """The test's own canonicalization: normalize, then /etc, /tmp, /var live in /private."""
    normal = "/" + posixpath.normpath(path).lstrip("/")
    for root in ("/etc", "/tmp", "/var"):
        if normal == root or normal.startswith(root + "/"):
            return "/private" + normal
    return normal


def _spec_paths(spec: SandboxSpec) -> tuple[set[str], set[str]]:
    readable: set[str] = set()
    writable: set[str] = set()
    if spec.workspace is not None:
        readable.add(_canon(spec.workspace))
        if spec.workspace_mode == "rw":
            writable.add(_canon(spec.workspace))
    for bind in spec.binds:
        readable.add(_canon(bind.source))
        if bind.mode == "rw":
            writable.add(_canon(bind.source))
    return readable, writable


def _plain(node: Node) -> object:
    """A node as plain Python values, for comparisons."""
    if isinstance(node, Sym):
        return node.name
    if isinstance(node, Str):
        return ("str", node.value)
    if isinstance(node, Regex):
        return ("regex", node.pattern)
    if isinstance(node, list):
        return [_plain(child) for child in node]
    return node


def _symbols(node: Node) -> list[str]:
    """The top-level symbols of a form: its rule keyword and operations."""
    return (
        [child.name for child in node if isinstance(child, Sym)] if isinstance(node, list) else []
    )


def _ancestors(path: str) -> set[str]:
    found = {"/"}
    while (path := posixpath.dirname(path)) != "/":
        found.add(path)
    return found


def check_profile(profile: str, spec: SandboxSpec) -> None:
    """Assert the profile is well-formed, deny-default, and grants only what the spec allows."""
    forms = parse(profile)
    assert _plain(forms[0]) == ["version", 1]
    assert _plain(forms[1]) == ["deny", "default"], "the profile must start (deny default)"
    readable, writable = _spec_paths(spec)
    system = set(SYSTEM_READ_SUBPATHS) | set(SYSTEM_READ_LITERALS)
    devices = set(SYSTEM_DEVICES_READ) | set(SYSTEM_DEVICES_RW)
    granted = readable | system
    metadata_ok = {a for path in granted for a in _ancestors(path)} | {"/etc", "/tmp", "/var"}
    pty = {"/dev/ptmx", "/dev/tty"} if spec.pty else set()
    for form in forms[2:]:
        plain = _plain(form)
        assert isinstance(plain, list)
        assert plain[0] == "allow", f"only allow rules follow (deny default): {plain}"
        ops = [item for item in plain[1:] if isinstance(item, str)]
        filters = [item for item in plain[1:] if isinstance(item, list)]
        assert ops, plain
        assert set(ops) <= KNOWN_OPS, f"unexpected operation in {plain}"
        assert not any(op.startswith("network") for op in ops)
        if ops == ["pseudo-tty"]:
            assert spec.pty
            continue
        if ops == ["process-fork"]:
            continue
        assert filters, f"an unfiltered allow grants everything: {plain}"
        for item in filters:
            _check_filter(ops, item, spec, readable, writable, granted, devices, metadata_ok, pty)


def _check_filter(
    ops: list[str],
    item: list[object],
    spec: SandboxSpec,
    readable: set[str],
    writable: set[str],
    granted: set[str],
    devices: set[str],
    metadata_ok: set[str],
    pty: set[str],
) -> None:
    kind, *args = item
    if kind == "target":
        assert args == ["same-sandbox"]
        assert set(ops) <= {"process-info*", "signal"}
        return
    if kind == "global-name":
        assert ops == ["mach-lookup"]
        assert args[0] == ("str", MACH_SERVICES[0])
        return
    if kind in ("sysctl-name", "sysctl-name-prefix"):
        assert ops == ["sysctl-read"]
        name = args[0][1]  # type: ignore[index]
        assert name in (SYSCTL_NAMES if kind == "sysctl-name" else SYSCTL_PREFIXES)
        assert name != "kern.hostname"
        assert not name.startswith("kern.proc")
        return
    if kind == "regex":
        assert spec.pty, "a regex filter appears only for the PTY"
        assert args == [("regex", "^/dev/ttys[0-9]+$")]
        return
    assert kind in ("subpath", "literal"), item
    assert set(ops) <= FILE_OPS | {"process-exec"}
    if args == [TMP_PARAM]:
        return  # the private temp dir: read, write, exec
    path = args[0][1]  # type: ignore[index]
    writes = bool(set(ops) & WRITE_OPS)
    if writes:
        allowed = (
            (kind == "subpath" and path in writable)
            or path in set(SYSTEM_DEVICES_RW) | pty
            or (kind == "subpath" and path == "/dev/fd")
        )
        assert allowed, f"write to {path!r} is not granted by the spec"
    elif ops == ["file-read-metadata"]:
        assert kind == "literal"
        assert path in metadata_ok, f"metadata of {path!r} is not an ancestor of a grant"
    elif "process-exec" in ops:
        assert kind == "subpath"
        assert path in granted, f"exec beneath {path!r} is not granted"
    else:
        assert path in granted | devices | pty | {"/dev/fd"}, f"read of {path!r} not granted"


@pytest.mark.parametrize("name", list(SPECS))
def test_golden_profiles(name: str) -> None:
    """Rendering each reference spec gives exactly its reviewed golden profile."""
    assert render_sbpl(SPECS[name]()) == vector_path(name).read_text()


@pytest.mark.parametrize("name", list(SPECS))
def test_golden_profiles_are_well_formed_and_grant_only_the_spec(name: str) -> None:
    """Each golden profile reads cleanly, starts (deny default) and grants only its spec."""
    check_profile(vector_path(name).read_text(), SPECS[name]())


def test_hostile_paths_keep_the_structure_and_round_trip() -> None:
    """Quotes, backslashes, parens, semicolons and newlines stay inside their strings."""
    spec = hostile_spec()
    forms = parse(render_sbpl(spec))
    benign = SandboxSpec(
        argv=("/bin/sh",),
        workspace="/Users/dev/plain",
        binds=(
            *(Bind(f"/opt/plain{i}", mode=b.mode) for i, b in enumerate(HOSTILE_BINDS[:-1])),
            Bind("/var/x"),
        ),
    )
    assert [_symbols(f) for f in forms] == [_symbols(f) for f in parse(render_sbpl(benign))]
    found = {value for form in forms for value in strings(form)}
    assert _canon(HOSTILE_WORKSPACE) in found
    for bind in HOSTILE_BINDS:
        assert _canon(bind.source) in found
    assert ["allow", "default"] not in [_plain(f) for f in forms]


def test_no_path_is_ever_written_into_a_comment() -> None:
    """Comment lines are fixed text: a path with a newline cannot start a rule from one."""
    for name, make in SPECS.items():
        spec = make()
        readable, _ = _spec_paths(spec)
        for line in render_sbpl(spec).splitlines():
            if line.lstrip().startswith(";"):
                assert not any(path in line for path in readable if path != "/"), (name, line)


_SEGMENT = st.text(
    alphabet=st.sampled_from(string.ascii_letters + string.digits + ' "\\();#|*\n\t\r.-_\u00e9'),
    min_size=1,
    max_size=12,
).filter(lambda s: s not in (".", ".."))


@st.composite
def _specs(draw: st.DrawFn) -> SandboxSpec:
    def path() -> str:
        return "/" + "/".join(draw(st.lists(_SEGMENT, min_size=1, max_size=3)))

    binds = tuple(
        Bind(p, mode=draw(st.sampled_from(["ro", "rw"])))
        for p in draw(st.lists(st.builds(path), max_size=4))
        if not any(p == r or p.startswith(r + "/") for r in ("/proc", "/dev", "/tmp"))
    )
    return SandboxSpec(
        argv=("/bin/sh",),
        workspace=draw(st.none() | st.builds(path)),
        workspace_mode=draw(st.sampled_from(["ro", "rw"])),
        binds=binds,
        pty=draw(st.booleans()),
    )


@settings(max_examples=300, deadline=None)
@given(_specs())
def test_every_generated_profile_is_well_formed_and_grants_only_the_spec(spec: SandboxSpec) -> None:
    """For arbitrary hostile paths, the profile parses and grants nothing beyond the spec."""
    profile = render_sbpl(spec)
    check_profile(profile, spec)
    found = {value for form in parse(profile) for value in strings(form)}
    readable, _ = _spec_paths(spec)
    assert readable <= found


@pytest.mark.parametrize(
    ("text", "literal"),
    [
        ("/plain", '"/plain"'),
        ('/q"uote', '"/q\\"uote"'),
        ("/back\\slash", '"/back\\\\slash"'),
        ("/new\nline", '"/new\\nline"'),
        ("/tab\tcr\r", '"/tab\\tcr\\r"'),
        ("/(paren) ;semi", '"/(paren) ;semi"'),
    ],
)
def test_sbpl_string_escapes(text: str, literal: str) -> None:
    """Backslash, quote, newline, tab and CR are escaped; everything else is literal."""
    assert sbpl_string(text) == literal
    assert parse(literal) == [Str(text)]


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x1b", "\x7f"])
def test_control_characters_without_a_safe_escape_are_refused(char: str) -> None:
    """A control character other than newline, tab or CR cannot be carried: refused."""
    with pytest.raises(SpecError, match="control character"):
        sbpl_string(f"/bad{char}path")


def test_relocated_binds_and_retained_copies_are_refused() -> None:
    """macOS has no mount namespace: a bind must appear at its own path; no retained images."""
    with pytest.raises(SpecError, match="mount namespace"):
        render_sbpl(SandboxSpec(argv=("sh",), binds=(Bind("/opt/a", target="/opt/b"),)))
    render_sbpl(SandboxSpec(argv=("sh",), binds=(Bind("/opt/a", target="/opt/a/"),)))
    retained = Retained(image="/var/img", target="/data", size=16 * 1024 * 1024)
    with pytest.raises(SpecError, match="Linux only"):
        render_sbpl(SandboxSpec(argv=("sh",), retained=(retained,)))


def test_firmlinked_roots_are_canonicalized() -> None:
    """/etc, /tmp and /var are granted under /private; look-alikes are not rewritten."""
    spec = SandboxSpec(
        argv=("sh",), binds=(Bind("/etc/hosts"), Bind("/var/db/x"), Bind("/etcetera/y"))
    )
    found = {value for form in parse(render_sbpl(spec)) for value in strings(form)}
    assert {"/private/etc/hosts", "/private/var/db/x", "/etcetera/y"} <= found
    assert "/etc/hosts" not in found


def test_no_network_rule_for_any_spec() -> None:
    """network: none has no allowance at all: not even loopback or the DNS socket."""
    for make in SPECS.values():
        for form in parse(render_sbpl(make())):
            plain = _plain(form)
            assert isinstance(plain, list)
            assert not any(isinstance(x, str) and x.startswith("network") for x in plain)


def test_reader_rejects_what_a_broken_renderer_would_produce() -> None:
    """The reader is strict: an unescaped quote or an unbalanced form is an error."""
    with pytest.raises(ParseError):
        parse('(allow file-read* (subpath "/a"b"))')
    with pytest.raises(ParseError):
        parse('(allow file-read* (subpath "/a")')
    with pytest.raises(ParseError):
        parse('(allow file-read* (subpath "/a\\q"))')
