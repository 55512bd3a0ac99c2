"""Profiles: strict TOML decoding, the embedded default, and command-line overrides."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from glove.container import (
    Bind,
    Limits,
    Overrides,
    ProfileError,
    build_spec,
    decode_profile,
    embedded_profiles,
    load_profile,
)


def test_default_profile_is_embedded_and_sane() -> None:
    """The default profile loads, binds /usr read-only and sets all six limits."""
    profile = load_profile(None)
    assert Bind(source="/usr") in profile.bind
    assert all(bind.mode == "ro" for bind in profile.bind)
    assert profile.workspace.mode == "rw"
    assert profile.network.mode == "none"
    assert profile.limits.pids == 1024
    assert (profile.limits.wall_time, profile.limits.cpu_time) == ("24h", "8h")
    assert (profile.limits.memory, profile.limits.disk, profile.limits.output) == ("4G", "1G", "4G")
    assert profile.limits.accept_weaker == ["memory", "cpu_time"]


def test_unknown_key_is_an_error_with_its_path() -> None:
    """A misspelt key fails decoding and the error names where it is."""
    with pytest.raises(ProfileError) as info:
        decode_profile(b"[limits]\nmemroy = '1G'\n", "test.toml")
    assert "memroy" in str(info.value)
    assert "$.limits" in str(info.value)


def test_wrong_type_is_an_error_with_its_path() -> None:
    """A value of the wrong type fails decoding with its path."""
    with pytest.raises(ProfileError) as info:
        decode_profile(b"[[bind]]\nsource = 3\n", "t.toml")
    assert "$.bind[0].source" in str(info.value)


def test_invalid_bind_in_profile_is_a_profile_error() -> None:
    """A bind that fails validation surfaces as a ProfileError."""
    with pytest.raises(ProfileError):
        decode_profile(b"[[bind]]\nsource = 'relative'\n", "t.toml")


def test_malformed_toml_is_a_profile_error() -> None:
    """Broken TOML is a ProfileError, not a crash."""
    with pytest.raises(ProfileError):
        decode_profile(b"[limits\n", "t.toml")


def test_missing_profile_name_and_file(tmp_path: Path) -> None:
    """An unknown embedded name or an unreadable file is a ProfileError."""
    with pytest.raises(ProfileError):
        load_profile("no_such_profile")
    with pytest.raises(ProfileError):
        load_profile(str(tmp_path / "absent.toml"))
    with pytest.raises(ProfileError):
        load_profile("../etc")


def test_profile_file_and_overrides(tmp_path: Path) -> None:
    """A file profile is used; CLI limits win and drop that limit's accepted weakness."""
    path = tmp_path / "p.toml"
    path.write_text(
        "hostname = 'box'\n[workspace]\nenabled = false\n[env]\npass = ['KEEP']\n"
        "[env.set]\nFIXED = '1'\n[limits]\nmemory = '1G'\noutput = 100\n"
        "accept_weaker = ['memory', 'cpu_time']\n"
    )
    profile = load_profile(str(path))
    spec = build_spec(
        profile,
        ["true"],
        cwd="/",
        host_env={"KEEP": "k", "DROP": "d"},
        overrides=Overrides(env={"X": "y"}, limits={"memory": 2**29}),
    )
    assert spec.hostname == "box"
    assert spec.workspace is None
    assert spec.env == {"KEEP": "k", "FIXED": "1", "X": "y"}
    assert spec.limits == Limits(memory=2**29, output=100)
    assert spec.accept_weaker == frozenset({"cpu_time"})


def test_bad_limit_value_in_profile() -> None:
    """A limit value that does not parse is reported as a profile problem."""
    profile = decode_profile(b"[limits]\ndisk = 'lots'\n", "t.toml")
    with pytest.raises(ProfileError):
        build_spec(profile, ["true"], cwd="/", host_env={})


def test_extends_changes_only_what_it_names(tmp_path: Path) -> None:
    """A profile extending the default keeps its binds and limits, changing only its own keys."""
    path = tmp_path / "mine.toml"
    path.write_text(
        'extends = "default"\n'
        '[limits]\nmemory = "8G"\naccept_weaker = []\n'
        '[env]\npass = ["EDITOR"]\n'
        '[[bind]]\nsource = "/opt/tools"\noptional = true\n'
        '[[bind]]\nsource = "/usr"\nmode = "ro"\noptional = true\n'
    )
    mine, base = load_profile(str(path)), load_profile(None)
    assert mine.limits.memory == "8G"
    assert mine.limits.pids == base.limits.pids
    assert mine.limits.wall_time == base.limits.wall_time
    assert mine.limits.accept_weaker == []  # lists other than bind/use/pass replace
    assert mine.env.pass_ == [*base.env.pass_, "EDITOR"]
    assert mine.env.set == base.env.set
    sources = [bind.source for bind in mine.bind]
    assert sources[-2:] == ["/opt/tools", "/usr"]  # the child's binds come after the base's
    assert sources.count("/usr") == 1  # same target: the child's replaces the base's
    assert next(b for b in mine.bind if b.source == "/usr").optional
    assert len(mine.bind) == len(base.bind) + 1


def test_extends_resolves_a_path_beside_the_profile(tmp_path: Path) -> None:
    """``extends = "base.toml"`` is found next to the extending file, whatever the cwd."""
    (tmp_path / "base.toml").write_text('hostname = "from-base"\n[limits]\npids = 7\n')
    (tmp_path / "child.toml").write_text('extends = "base.toml"\n[limits]\npids = 9\n')
    child = load_profile(str(tmp_path / "child.toml"))
    assert (child.hostname, child.limits.pids) == ("from-base", 9)


def test_an_extends_cycle_is_refused_with_its_chain(tmp_path: Path) -> None:
    """a -> b -> a is an error naming the cycle, not a recursion."""
    (tmp_path / "a.toml").write_text('extends = "b.toml"\n')
    (tmp_path / "b.toml").write_text('extends = "a.toml"\n')
    with pytest.raises(ProfileError, match="cycle"):
        load_profile(str(tmp_path / "a.toml"))


def test_an_unknown_base_names_the_embedded_profiles(tmp_path: Path) -> None:
    """Extending a profile that does not exist says which embedded ones do."""
    (tmp_path / "x.toml").write_text('extends = "nosuch"\n')
    with pytest.raises(ProfileError, match=r"embedded: claude, codex, default, node-agent"):
        load_profile(str(tmp_path / "x.toml"))


def test_a_bad_key_under_extends_keeps_its_path(tmp_path: Path) -> None:
    """Strict decoding still names the bad key's path after the merge."""
    (tmp_path / "x.toml").write_text('extends = "default"\n[limits]\nmemroy = "1G"\n')
    with pytest.raises(ProfileError, match=r"\$\.limits"):
        load_profile(str(tmp_path / "x.toml"))


def test_durations_take_units_in_profiles() -> None:
    """``wall_time = "5s"`` is accepted as sizes accept ``"1G"``."""
    profile = decode_profile(b'[limits]\nwall_time = "5s"\ncpu_time = "2m"\n', "t.toml")
    spec = build_spec(profile, ["true"], cwd="/", host_env={})
    assert (spec.limits.wall_time, spec.limits.cpu_time) == (5.0, 120.0)


def test_the_packed_profiles_are_the_embedded_tomls_decoded() -> None:
    """``profiles/packed.json`` is current (regenerate it after changing a profile:
    ``python -c "from glove.container._profile import *; import pathlib;
    pathlib.Path('src/glove/container/profiles/packed.json').write_bytes(
    pack_embedded_profiles())"``) and each packed profile equals its TOML decoded."""
    from glove.container import _profile

    folder = Path(_profile.__file__).parent / "profiles"
    assert (folder / _profile.PACKED_PROFILES).read_bytes() == _profile.pack_embedded_profiles()
    for name in embedded_profiles():
        data, origin, _ = _profile._read_profile(name, None)
        assert _profile._packed_profile(name) == decode_profile(data, origin)


def test_a_stale_packed_profile_is_not_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a TOML file differs from what was packed, its profile comes from the TOML."""
    from glove.container import _profile

    folder = tmp_path / "profiles"
    shutil.copytree(Path(_profile.__file__).parent / "profiles", folder)
    monkeypatch.setattr(_profile, "_profiles_folder", lambda: folder)
    assert _profile._packed_profile("default") is not None
    default = folder / "default.toml"
    default.write_text(default.read_text().replace('hostname = "glove"', 'hostname = "edited"'))
    assert _profile._packed_profile("default") is None
