"""Lexical POSIX path normalization and containment, without touching the filesystem.

What this can and cannot promise is in ``docs/policy.md``: the check sees only strings,
so it cannot see symlinks. A path is normalized by dropping ``.`` and empty components and
letting ``..`` remove the previous component (never climbing above ``/``), then compared
component-wise with the allowed roots. Where symlinks may exist, ``..`` can be refused
outright instead of normalized (``DotDot.DENY``).
"""

import enum

__all__ = ["DotDot", "PathRejected", "is_within", "normalize_path", "normalize_root"]


class DotDot(enum.Enum):
    """What a ``..`` component does."""

    NORMALIZE = "normalize"
    """Remove the previous component (lexically; unsound across symlinks)."""
    DENY = "deny"
    """Refuse the whole path."""


class PathRejected(ValueError):
    """A path that cannot be normalized safely; the message says why (never the path)."""


def _components(path: str) -> list[str]:
    """Split on ``/`` and drop empty and ``.`` components."""
    return [part for part in path.split("/") if part not in ("", ".")]


def normalize_path(value: str, *, base: str | None, dotdot: DotDot) -> str:
    """Normalize a path given in a tool call into an absolute path with no ``.``/``..``.

    Args:
        value: the path the agent sent.
        base: an absolute, normalized directory relative paths are joined to; ``None``
            refuses relative paths.
        dotdot: whether ``..`` is normalized or refused.

    Returns:
        The absolute normalized path, ``/`` or ``/a/b`` (never a trailing ``/``).

    Raises:
        PathRejected: empty, holds NUL, starts with ``~``, is relative with no base, or
            holds ``..`` when ``dotdot`` is :attr:`DotDot.DENY`.
    """
    if value == "":
        raise PathRejected("empty path")
    if "\x00" in value:
        raise PathRejected("path holds a NUL character")
    if value.startswith("~"):
        # Servers such as server-filesystem expand "~" to a home directory: a lexical
        # check cannot know where that lands, so refuse it.
        raise PathRejected("path starts with '~' (home directory expansion)")
    if value.startswith("/"):
        parts = _components(value)
    elif base is None:
        raise PathRejected("relative path and the rule has no base")
    else:
        parts = _components(base) + _components(value)
    stack: list[str] = []
    for part in parts:
        if part == "..":
            if dotdot is DotDot.DENY:
                raise PathRejected("path holds a '..' component")
            if stack:
                stack.pop()
        else:
            stack.append(part)
    return "/" + "/".join(stack)


def normalize_root(root: str) -> str:
    """Normalize a configured root: absolute, no ``..``, no NUL.

    Raises:
        PathRejected: the root is relative, empty, holds NUL or holds ``..``.
    """
    if not root.startswith("/"):
        raise PathRejected("root must be an absolute path")
    return normalize_path(root, base=None, dotdot=DotDot.DENY)


def is_within(path: str, root: str) -> bool:
    """Whether normalized ``path`` equals normalized ``root`` or lies beneath it.

    Component-wise: ``/srv/work2`` is not within ``/srv/work``.

    Raises:
        Nothing.
    """
    if root == "/":
        return path.startswith("/")
    return path == root or path.startswith(root + "/")
