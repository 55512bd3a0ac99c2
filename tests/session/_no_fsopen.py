"""Run gloved with ``fsopen``, ``fsmount`` and ``fspick`` failing with ENOSYS (a kernel or a
seccomp profile without the new mount API's filesystem contexts): fault injection for the
projection fallback. The filter is inherited by every process gloved starts, so a sandbox's
init sees the same. Only stdlib and ``pyseccomp``: the test user's interpreter runs it.

Usage: ``_no_fsopen.py [gloved arguments...]``.
"""

from __future__ import annotations

import errno
import runpy
import sys

import pyseccomp as seccomp


def main() -> None:
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in ("fsopen", "fsmount", "fspick"):
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
    rules.load()
    sys.argv = ["glove.daemon", *sys.argv[1:]]
    runpy.run_module("glove.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
