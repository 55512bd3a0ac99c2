"""Profiles: strict TOML decoding, the embedded default, and command-line overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from glove.container import (
    Bind,
    Limits,
    Overrides,
    ProfileError,
    build_spec,
    decode_profile,
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
