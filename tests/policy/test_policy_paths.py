"""Lexical path normalization and containment, checked against posixpath as a reference."""

import posixpath
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.policy._paths import DotDot, PathRejected, is_within, normalize_path, normalize_root

component = st.sampled_from(["", ".", "..", "a", "b", "work", "srv", "etc", "...", ".a", "a b"])
absolute_path = st.lists(component, max_size=10).map(lambda parts: "/" + "/".join(parts))
relative_path = (
    st.lists(component, min_size=1, max_size=10)
    .map("/".join)
    .filter(lambda text: text != "" and not text.startswith("/"))
)
root = st.sampled_from(["/", "/srv", "/srv/work", "/srv/work/a", "/etc"])


def reference_normalize(path: str) -> str:
    """posixpath.normpath, minus its POSIX special case for a leading ``//``."""
    normal = posixpath.normpath("/" + path.lstrip("/"))
    return "/" if normal == "//" else normal


def reference_within(path: str, top: str) -> bool:
    """Containment via posixpath.commonpath over normalized paths."""
    return posixpath.commonpath([path, top]) == top


@settings(deadline=None)  # no wall-clock deadline: CI machines are loaded
@given(absolute_path)
def test_normalize_agrees_with_posixpath(path: str) -> None:
    """Absolute paths normalize exactly as posixpath.normpath does (no symlinks assumed)."""
    assert normalize_path(path, base=None, dotdot=DotDot.NORMALIZE) == reference_normalize(path)


@settings(deadline=None)  # no wall-clock deadline: CI machines are loaded
@given(absolute_path)
def test_normalized_paths_are_canonical(path: str) -> None:
    """A normalized path is absolute, has no ``.``/``..``/empty component and is a fixpoint."""
    normal = normalize_path(path, base=None, dotdot=DotDot.NORMALIZE)
    assert normal.startswith("/")
    parts = normal.split("/")[1:]
    assert normal == "/" or all(part not in ("", ".", "..") for part in parts)
    assert normalize_path(normal, base=None, dotdot=DotDot.DENY) == normal


@settings(deadline=None)  # no wall-clock deadline: CI machines are loaded
@given(relative_path, root)
def test_relative_paths_join_the_base(path: str, base: str) -> None:
    """A relative path is normalized as if appended to the base."""
    normal = normalize_path(path, base=base, dotdot=DotDot.NORMALIZE)
    assert normal == reference_normalize(base + "/" + path)


@settings(deadline=None)  # no wall-clock deadline: CI machines are loaded
@given(absolute_path, root)
def test_containment_agrees_with_commonpath(path: str, top: str) -> None:
    """is_within on normalized paths agrees with posixpath.commonpath."""
    normal = normalize_path(path, base=None, dotdot=DotDot.NORMALIZE)
    assert is_within(normal, top) == reference_within(normal, top)


@settings(deadline=None)  # no wall-clock deadline: CI machines are loaded
@given(st.lists(component, max_size=8), root)
def test_traversal_never_escapes_a_root(parts: list[str], top: str) -> None:
    """root + components: inside exactly when the reference says so; never climbing is inside."""
    candidate = top.rstrip("/") + "/" + "/".join(parts)
    normal = normalize_path(candidate, base=None, dotdot=DotDot.NORMALIZE)
    inside = is_within(normal, top)
    assert inside == reference_within(reference_normalize(candidate), top)
    depth, climbed_out = 0, False
    for part in parts:
        if part == "..":
            depth -= 1
            climbed_out = climbed_out or depth < 0
        elif part not in ("", "."):
            depth += 1
    if not climbed_out:
        assert inside
    if climbed_out and top != "/" and depth < 0:
        assert not inside


@pytest.mark.parametrize(
    ("path", "top", "inside"),
    [
        ("/srv/work", "/srv/work", True),
        ("/srv/work/a/b", "/srv/work", True),
        ("/srv/work2", "/srv/work", False),
        ("/srv/wor", "/srv/work", False),
        ("/srv", "/srv/work", False),
        ("/anything", "/", True),
    ],
)
def test_containment_is_component_wise(path: str, top: str, inside: bool) -> None:
    """A sibling sharing a prefix (``/srv/work2``) is not inside ``/srv/work``."""
    assert is_within(path, top) is inside


@pytest.mark.parametrize(
    ("path", "base", "dotdot", "problem"),
    [
        ("", "/srv", DotDot.NORMALIZE, "empty"),
        ("/srv/a\x00b", None, DotDot.NORMALIZE, "NUL"),
        ("~/secrets", "/srv", DotDot.NORMALIZE, "~"),
        ("~root/.ssh", "/srv", DotDot.NORMALIZE, "~"),
        ("a/b", None, DotDot.NORMALIZE, "relative"),
        ("/srv/work/../x", None, DotDot.DENY, ".."),
        ("a/../b", "/srv", DotDot.DENY, ".."),
    ],
)
def test_unsafe_paths_are_rejected(
    path: str, base: str | None, dotdot: DotDot, problem: str
) -> None:
    """Empty, NUL, home-relative, base-less relative and (when asked) dotdot paths are refused."""
    with pytest.raises(PathRejected, match=re.escape(problem)):
        normalize_path(path, base=base, dotdot=dotdot)


@pytest.mark.parametrize("bad", ["relative", "", "/srv/../etc", "/a\x00"])
def test_roots_must_be_absolute_and_clean(bad: str) -> None:
    """A configured root must be absolute, non-empty, NUL-free and without ``..``."""
    with pytest.raises(PathRejected):
        normalize_root(bad)


def test_root_is_normalized() -> None:
    """Trailing and repeated slashes and ``.`` vanish from a root."""
    assert normalize_root("//srv/./work//") == "/srv/work"
