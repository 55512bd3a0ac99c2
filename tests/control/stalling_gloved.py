"""The real gloved, plus a test-only way to wedge its event loop.

Run as a script: it installs a SIGUSR2 handler on gloved's own event loop that blocks the
loop (``time.sleep``) for ``GLOVE_TEST_STALL_S`` seconds, then runs the unchanged
``gloved`` entry point. The hook lives here, in the tests, so production gloved has no way
to be stalled on purpose, from the socket or otherwise.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import glove.daemon._root as daemon
from glove.daemon import main

_real_serve = daemon.serve


async def _serve_with_stall_hook(*args: object, **kwargs: object) -> int:
    stall_s = float(os.environ["GLOVE_TEST_STALL_S"])
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR2, time.sleep, stall_s)
    return await _real_serve(*args, **kwargs)  # type: ignore[arg-type]


daemon.serve = _serve_with_stall_hook  # type: ignore[assignment]

if __name__ == "__main__":
    main()
