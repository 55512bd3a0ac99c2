"""Keep the mediator's own files out of the sandbox: refuse a launch that would show them.

A contained agent that can read the mediator's policy learns what it may not do; one that
can write it, or the audit log, or an upstream's program or working directory, rewrites
the rules of its next run or runs code on the host. Masking those paths inside the sandbox
is not enough: an agent that cannot see ``cfg/policy.toml`` can still rename ``cfg`` and
create a new one for the next run (decision 0006). So the launch is refused instead,
before anything starts, with a message naming the overlap and the flag to change.

What counts as "shown": every bind source, the workspace and every retained seed, by the
device and inode of what is really mounted (the launcher's ``openat2`` descriptors), so a
``..`` spelling, a second path to the same directory through a host bind mount, or a
symlink on the way to a protected file are all caught:

* a source that *is* a protected path or any directory the path resolves through (its
  ancestors, and the directories holding each symlink on the way: a visible symlink can be
  re-pointed at a file the agent wrote);
* a source inside a protected *tree* (an upstream's working directory);
* a protected regular file with more than one hard link when a source on the same
  filesystem is shown (another name for it may be in view there; nothing inside can make a
  new link, since it cannot name the file, and links never cross filesystems).

An entry marked ``writable_only`` (a host program an upstream runs) may be shown read-only:
only writable sources count for it.
"""

# Path strings are walked one component at a time with lstat (pathlib would resolve or
# normalize behind our back, which is the very thing this check must see through).
# ruff: noqa: PTH115, PTH118, PTH120
from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple

from glove.container._spec import Protected
from glove.container.errors import SpecError

#: Symlinks followed while resolving one protected path (the kernel's own limit is 40).
MAX_SYMLINK_HOPS: Final = 40

Identity = tuple[int, int]


class Shown(NamedTuple):
    """A host object the sandbox will show: its path, identity, origin and writability."""

    path: str
    identity: Identity
    origin: str
    writable: bool


class _Resolved(NamedTuple):
    dirs: frozenset[Identity]
    target: Identity | None
    links: int


def _resolve_chain(path: str) -> _Resolved:
    """Walk ``path`` component by component, following symlinks, recording every directory.

    A missing component ends the walk (the path may be created later: its existing parents
    are what must stay hidden).
    """
    dirs: set[Identity] = set()
    pending = [part for part in path.split("/") if part]
    current = "/"
    hops = 0
    root = os.lstat("/")
    dirs.add((root.st_dev, root.st_ino))
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            current = os.path.dirname(current.rstrip("/")) or "/"
            continue
        candidate = os.path.join(current, part)
        try:
            info = os.lstat(candidate)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return _Resolved(frozenset(dirs), None, 0)
            raise SpecError(f"cannot inspect {candidate}: {exc.strerror}") from exc
        if stat.S_ISLNK(info.st_mode):
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise SpecError(f"{path}: too many levels of symbolic links")
            link = os.readlink(candidate)
            pending = [p for p in link.split("/") if p] + pending
            if link.startswith("/"):
                current = "/"
            continue
        if stat.S_ISDIR(info.st_mode):
            dirs.add((info.st_dev, info.st_ino))
            current = candidate
            continue
        if pending:  # a file in the middle of the path: nothing below it exists
            return _Resolved(frozenset(dirs), None, 0)
        return _Resolved(frozenset(dirs), (info.st_dev, info.st_ino), info.st_nlink)
    final = os.lstat(current)
    return _Resolved(frozenset(dirs), (final.st_dev, final.st_ino), 1)


def _ancestors(path: str) -> Iterable[tuple[str, Identity]]:
    """The strict ancestors of a source (sources hold no symlinks: ``openat2`` refused them)."""
    parent = os.path.dirname(path.rstrip("/"))
    while True:
        try:
            info = os.lstat(parent or "/")
        except OSError:
            return
        yield parent or "/", (info.st_dev, info.st_ino)
        if parent in ("", "/"):
            return
        parent = os.path.dirname(parent)


def _fix(origin: str) -> str:
    if origin == "workspace":
        return "choose another workspace with --workspace DIR"
    if origin == "seed":
        return "seed the retained copy from another directory"
    return "drop or narrow that bind (a --bind, or the profile's [[bind]])"


def check_protected(shown: Sequence[Shown], protected: Sequence[Protected]) -> None:
    """Refuse when anything ``shown`` would expose a ``protected`` path.

    Raises:
        SpecError: the first overlap, naming both paths and the flag to change.
    """
    for item in protected:
        resolved = _resolve_chain(os.path.normpath(item.path))
        sources = [s for s in shown if s.writable or not item.writable_only]
        verb = "expose" if item.writable_only else "show"
        if resolved.links > 1 and resolved.target is not None:
            device = resolved.target[0]
            near = next((s for s in sources if s.identity[0] == device), None)
            if near is not None:
                raise SpecError(
                    f"{item.what} {item.path} has {resolved.links} hard links and the "
                    f"{near.origin} {near.path} is on the same filesystem: another name for it "
                    "could be visible inside the sandbox; remove the extra links"
                )
        hidden = set(resolved.dirs)
        if resolved.target is not None:
            hidden.add(resolved.target)
        for source in sources:
            if source.identity in hidden:
                harm = "run its own code there" if item.writable_only else "read or change it"
                raise SpecError(
                    f"the {source.origin} {source.path} would {verb} {item.what} {item.path} "
                    f"to the sandbox, which could {harm}; keep the mediator's files outside "
                    f"what the sandbox sees, or {_fix(source.origin)}"
                )
            if item.tree and resolved.target is not None:
                for ancestor, identity in _ancestors(source.path):
                    if identity == resolved.target:
                        raise SpecError(
                            f"the {source.origin} {source.path} lies inside {item.what} "
                            f"{ancestor}, which the sandbox must not reach; "
                            f"{_fix(source.origin)}"
                        )
