"""gloved.toml's ``[projections.ALIAS]`` tables: a file path inside the sandbox, each refusal
naming the key."""

from __future__ import annotations

import pytest

from glove.config import GlovedConfigError, ProjectionConfig, parse_gloved_config


def _toml(**targets: str) -> bytes:
    return "".join(
        f'[projections.{alias}]\ntarget = "{target}"\n' for alias, target in targets.items()
    ).encode()


def test_a_projection_alias_maps_to_its_target() -> None:
    """A normal file path is kept as given, by alias."""
    config = parse_gloved_config(_toml(skill="/skills/skill.md", notes="/opt/notes.txt"))
    assert config.projections == {
        "skill": ProjectionConfig(target="/skills/skill.md"),
        "notes": ProjectionConfig(target="/opt/notes.txt"),
    }
    assert parse_gloved_config(b"").projections == {}


@pytest.mark.parametrize(
    ("target", "needle"),
    [
        ("skills/skill.md", "absolute"),
        ("//skills/skill.md", "absolute"),
        ("/skills/../etc/x", "normalized"),
        ("/skills/./x", "normalized"),
        ("/skills/", "normalized"),
        ("/", "normalized"),
        ("/tmp", "the sandbox owns"),
        ("/proc/self/x", "under /proc"),
        ("/proc", "under /proc"),
        ("/dev/shm/x", "under /dev"),
        ("/sys/kernel/x", "under /sys"),
        ("/workspace/skill.md", "workspace"),
        ("/workspace", "workspace"),
        ("/skills/a\tb", "control character"),
    ],
)
def test_targets_outside_a_file_of_its_own_are_refused_naming_the_key(
    target: str, needle: str
) -> None:
    """Relative, unnormalized, kernel-tree, workspace and control-character targets."""
    with pytest.raises(GlovedConfigError) as info:
        parse_gloved_config(_toml(skill=target))
    assert "`projections.skill.target`" in str(info.value)
    assert needle in str(info.value)


def test_two_aliases_never_overlap() -> None:
    """A target on or under another alias's is refused, naming both keys."""
    for second in ("/skills/a", "/skills/a/b"):
        with pytest.raises(GlovedConfigError) as info:
            parse_gloved_config(_toml(one="/skills/a", two=second))
        assert "`projections.two.target`" in str(info.value)
        assert "`projections.one.target`" in str(info.value)


def test_a_bad_alias_or_an_unknown_key_is_refused() -> None:
    """An alias that is not an identifier, and any key but ``target``."""
    with pytest.raises(GlovedConfigError, match=r"`projections\.Skill`"):
        parse_gloved_config(_toml(Skill="/s/x"))
    with pytest.raises(GlovedConfigError, match="unknown field `mode`"):
        parse_gloved_config(b'[projections.a]\ntarget = "/s/x"\nmode = "rw"\n')
    with pytest.raises(GlovedConfigError, match="target"):
        parse_gloved_config(b"[projections.a]\n")
