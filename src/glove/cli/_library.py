"""``glove library add|list|remove|verify``: the owner's library store, offline.

The store is ``$XDG_STATE_HOME/glove/library`` (gloved's state directory, owner-only,
``glove.config.GlovePaths.library_dir``); these commands open it directly, no daemon
needed (gloved reads the same store when a plan names a bundle). Exit codes
(``glove.exits``):

==  ==========================================================================================
0   done (``add`` of bytes already stored is a no-op that succeeds)
1   ``verify``: a bundle differs or an entry is not as the store leaves it (each is named)
2   the store or the file refused the operation (its code is printed)
64  usage error
==  ==========================================================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import typer

from glove.exits import EXIT_LIBRARY_DIFFERS, EXIT_LIBRARY_REFUSED

if TYPE_CHECKING:
    from glove.library import Library


class BundleJson(TypedDict):
    """A bundle in ``list --json`` and ``verify --json``: its digest and size."""

    digest: str
    size: int


def register(app: typer.Typer) -> None:
    """Add the ``library`` command group to ``app``."""
    group = typer.Typer(
        help="The library: digest-named files (skills, fixtures) a plan can project.",
        no_args_is_help=True,
    )
    group.command("add")(add_cmd)
    group.command("list")(list_cmd)
    group.command("remove")(remove_cmd)
    group.command("verify")(verify_cmd)
    app.add_typer(group, name="library")


def _refuse(verb: str, code: str, message: str, as_json: bool) -> typer.Exit:
    """Say why on stderr (and as JSON on stdout with ``--json``); the exit to raise."""
    import json

    typer.echo(f"glove library {verb}: {message} ({code})", err=True)
    if as_json:
        typer.echo(json.dumps({"error": code, "message": message}))
    return typer.Exit(EXIT_LIBRARY_REFUSED)


def _open(verb: str, *, create: bool, as_json: bool) -> Library | None:
    """The store, or None when it does not exist yet and ``create`` is false.

    Raises:
        typer.Exit: the state directory or the store is unsafe or cannot be made.
    """
    from glove.config import UnsafePath, ensure_private_dir, glove_paths
    from glove.library import Library, LibraryError

    root = glove_paths().library_dir
    try:
        if create:
            ensure_private_dir(root.parent)
        elif not root.exists() and not root.is_symlink():
            return None
        return Library.open(root, create=create)
    except UnsafePath as exc:
        raise _refuse(verb, "library_root_unusable", str(exc), as_json) from exc
    except LibraryError as exc:
        raise _refuse(verb, exc.code, str(exc), as_json) from exc
    except OSError as exc:
        message = f"cannot create {root.parent}: {exc.strerror}"
        raise _refuse(verb, "library_root_unusable", message, as_json) from exc


def add_cmd(
    file: Path = typer.Argument(..., help="The file to store (a regular file, at most 64 MiB)."),
    as_json: bool = typer.Option(False, "--json", help='Print {"digest": ..., "size": N}.'),
) -> None:
    """Copy FILE into the library as a digest-named bundle; print its digest and size."""
    import json

    from glove.library import LibraryError

    library = _open("add", create=True, as_json=as_json)
    assert library is not None
    with library:
        try:
            bundle = library.add(file)
        except LibraryError as exc:
            raise _refuse("add", exc.code, str(exc), as_json) from exc
    if as_json:
        typer.echo(json.dumps({"digest": bundle.digest, "size": bundle.size}))
    else:
        typer.echo(f"{bundle.digest} {bundle.size}")


def list_cmd(
    as_json: bool = typer.Option(False, "--json", help='Print {"bundles": [...]}.'),
) -> None:
    """List the library's bundles (digest and size), without hashing them."""
    import json

    from glove.library import LibraryError

    library = _open("list", create=False, as_json=as_json)
    bundles: list[BundleJson] = []
    if library is not None:
        with library:
            try:
                bundles = [{"digest": b.digest, "size": b.size} for b in library.list()]
            except LibraryError as exc:
                raise _refuse("list", exc.code, str(exc), as_json) from exc
    if as_json:
        typer.echo(json.dumps({"bundles": bundles}))
    else:
        for bundle in bundles:
            typer.echo(f"{bundle['digest']} {bundle['size']}")


def remove_cmd(
    digest: str = typer.Argument(..., help="The bundle's digest, sha256:<64 hex>."),
) -> None:
    """Remove one bundle from the library."""
    from glove.library import LibraryError, bundle_name

    try:
        bundle_name(digest)  # a malformed name is refused before the store is looked at
    except LibraryError as exc:
        raise _refuse("remove", exc.code, str(exc), False) from exc
    library = _open("remove", create=False, as_json=False)
    if library is None:
        raise _refuse("remove", "projection_missing", f"no bundle {digest} in the library", False)
    with library:
        try:
            library.remove(digest)
        except LibraryError as exc:
            raise _refuse("remove", exc.code, str(exc), False) from exc
    typer.echo(f"removed {digest}")


def verify_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Re-hash every bundle; exit 1 naming each entry that differs or does not belong."""
    import json

    from glove.library import LibraryError

    library = _open("verify", create=False, as_json=as_json)
    bundles: list[BundleJson] = []
    problems: list[dict[str, str]] = []
    if library is not None:
        with library:
            try:
                report = library.verify()
            except LibraryError as exc:
                raise _refuse("verify", exc.code, str(exc), as_json) from exc
        bundles = [{"digest": b.digest, "size": b.size} for b in report.bundles]
        problems = [{"name": p.name, "code": p.code, "message": p.message} for p in report.problems]
    if as_json:
        typer.echo(json.dumps({"ok": not problems, "bundles": bundles, "problems": problems}))
    else:
        for problem in problems:
            typer.echo(f"FAILED {problem['name']}: {problem['message']} ({problem['code']})")
        if not problems:
            typer.echo(f"OK {len(bundles)} bundle(s)")
    if problems:
        raise typer.Exit(EXIT_LIBRARY_DIFFERS)
