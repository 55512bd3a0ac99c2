"""The PTY drain answers a request it cannot carry out with a refusal, never by crashing
(a crashed drain ends its whole session: the tree is one-for-all with intensity 0)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from glove.actors import ActorDead, Busy
from glove.session._messages import Refused, deadline_in
from glove.session._pty_drain import PtyDrain
from glove.session._terminals import RaiseSignal
from glove.session.errors import NoTerminal


class _RefusingSandbox:
    """A sandbox actor whose mailbox refuses (stopping, or full): fault injection."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def tell(self, _msg: object) -> None:
        raise self.error


@pytest.mark.parametrize(
    "error", [ActorDead("sandbox", "stopping"), Busy("sandbox", 16)], ids=["stopping", "full"]
)
async def test_a_signal_the_sandbox_cannot_take_is_a_refusal(
    tmp_path: Path, error: Exception
) -> None:
    drain = PtyDrain(tmp_path, capacity=1 << 16, size=(24, 80))
    master, slave = os.openpty()
    try:
        drain._pty = master
        drain._sandbox = _RefusingSandbox(error)  # type: ignore[assignment]
        reply = await drain.handle(RaiseSignal(deadline=deadline_in(), signum=signal.SIGTERM))
    finally:
        os.close(master)
        os.close(slave)
    assert isinstance(reply, Refused)
    assert isinstance(reply.error, NoTerminal)
    assert str(reply.error).startswith("the sandbox cannot take it: ")
