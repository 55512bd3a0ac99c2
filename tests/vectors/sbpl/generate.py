"""The golden SBPL profiles: the specs they come from, and how to write them again.

Run ``python -m tests.vectors.sbpl.generate`` after a deliberate change to the renderer,
then read the diff: every changed line is a changed permission.
"""

from __future__ import annotations

from pathlib import Path

from glove.container import Bind, SandboxSpec, build_spec, load_profile
from glove.container.macos import render_sbpl

HERE = Path(__file__).resolve().parent

#: Paths built to break a naive renderer: quotes, backslashes, parentheses, semicolons (SBPL
#: comments), newlines, tabs, carriage returns, a fake closing form, and non-ASCII.
HOSTILE_WORKSPACE = '/Users/dev/we"ird) (allow default) ;\\path\n(allow network*)'
HOSTILE_BINDS = (
    Bind('/opt/back\\slash\\"quote'),
    Bind('/opt/paren (allow file-write* (subpath "/"))', mode="rw"),
    Bind("/opt/semi;colon #| block |#"),
    Bind("/opt/tab\tand\rreturn"),
    Bind("/opt/\u00fcn\u00efc\u00f6d\u00e9 \u2603"),
    Bind("/var/firmlinked/../x"),
)


def default_spec() -> SandboxSpec:
    """The embedded default profile running /bin/sh in /Users/dev/project."""
    return build_spec(load_profile(None), ["/bin/sh"], cwd="/Users/dev/project", host_env={})


def hostile_spec() -> SandboxSpec:
    """A spec whose every path tries to escape its string literal."""
    return SandboxSpec(argv=("/bin/sh",), workspace=HOSTILE_WORKSPACE, binds=HOSTILE_BINDS)


def pty_readonly_spec() -> SandboxSpec:
    """A read-only workspace with a PTY and one rw bind."""
    return SandboxSpec(
        argv=("/bin/zsh",),
        workspace="/Users/dev/ro",
        workspace_mode="ro",
        pty=True,
        binds=(Bind("/usr"), Bind("/Users/dev/cache", mode="rw")),
    )


SPECS = {"default": default_spec, "hostile": hostile_spec, "pty-readonly": pty_readonly_spec}


def vector_path(name: str) -> Path:
    """Where the golden profile of ``name`` lives."""
    return HERE / f"{name}.sbpl"


def main() -> None:
    """Write every golden profile."""
    for name, make in SPECS.items():
        vector_path(name).write_text(render_sbpl(make()))
        print(f"wrote {vector_path(name)}")


if __name__ == "__main__":
    main()
