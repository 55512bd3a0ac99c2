"""The in-process launch's guard: gloved clones only in its launcher process.

Once gloved has forked its launcher (:func:`glove.container.linux.fork_launcher`), its
composition root calls :func:`forbid_in_process_launch`: from then on every in-process
launch in gloved (``glove.container.linux.launch``, so every path that would clone from
one of gloved's threads) raises :class:`InProcessLaunchForbidden` instead of cloning. The
launcher process is forked before the call, so its own launches are not affected. Nothing
lifts the ban: a launch that cannot go to the launcher fails closed.
"""

from __future__ import annotations

from glove.container.errors import SandboxError


class InProcessLaunchForbidden(SandboxError):
    """An in-process launch was asked in a process whose sandboxes its launcher clones."""


_forbidden: list[bool] = [False]


def forbid_in_process_launch() -> None:
    """Make every later in-process launch in this process raise (see the module docstring)."""
    _forbidden[0] = True


def check_in_process_launch() -> None:
    """Raise if this process may not clone in-process.

    Raises:
        InProcessLaunchForbidden: :func:`forbid_in_process_launch` was called here.
    """
    if _forbidden[0]:
        raise InProcessLaunchForbidden(
            "this process clones its sandboxes in its launcher process only; an in-process "
            "launch was refused"
        )
