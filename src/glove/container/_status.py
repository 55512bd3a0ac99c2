"""The sandbox init's status channel: typed messages and their line codec (sans-IO).

The init (pid 1 of the sandbox) tells the launcher what happened over a pipe, one short
line per message, in this order::

    unshared                  (fork path only: the namespaces exist)
    ready SETUP_CPU_S         the root is built, privileges dropped, seccomp loaded; the
                              CPU time the init spent on that inside the sandbox's groups
    started | exec ERRNO [DETAIL] | setup MESSAGE
    exit CODE | signal SIGNUM
    usage USER_S SYSTEM_S MAXRSS_BYTES
    disk BYTES
    retained BYTES TARGET     (one per retained copy)

``setup MESSAGE`` may come at any point before ``started`` (setup failed, nothing ran).
:func:`encode` writes one message; :class:`StatusDecoder` turns bytes back into messages,
one byte at a time or all at once, with a cap on what it buffers (checked before it grows)
and a typed :class:`StatusLineError` for anything that is not a message. The blocking
supervisor of ``glove exec`` and the asyncio one of ``gloved`` both read it this way.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec

#: Longest line accepted (a setup message names an exception and a path).
MAX_STATUS_LINE_BYTES: Final = 2048
#: Most bytes of status kept in all (a few short lines; the rest is dropped, counted).
MAX_STATUS_BYTES: Final = 16 * 1024


class Unshared(msgspec.Struct, frozen=True, tag="unshared"):
    """Fork path: the intermediate has created the namespaces."""


class Ready(msgspec.Struct, frozen=True, tag="ready"):
    """The root is built, privileges are dropped, seccomp is loaded.

    ``setup_cpu_s`` is the CPU time the init used for that since it was placed in the
    sandbox's cgroups (user plus system): Glove's work, not the command's, so the CPU-time
    watchdog does not count it against ``--cpu-time``.
    """

    setup_cpu_s: float = 0.0


class Started(msgspec.Struct, frozen=True, tag="started"):
    """The command was executed."""


class ExecFailed(msgspec.Struct, frozen=True, tag="exec"):
    """The command could not be executed (``errno`` from execve or posix_spawn)."""

    errno: int
    detail: str = ""


class SetupFailed(msgspec.Struct, frozen=True, tag="setup"):
    """Building the sandbox failed; the command never ran."""

    message: str


class Exited(msgspec.Struct, frozen=True, tag="exit"):
    """The command exited with ``code``."""

    code: int


class Signaled(msgspec.Struct, frozen=True, tag="signal"):
    """The command was killed by ``signum``."""

    signum: int


class Usage(msgspec.Struct, frozen=True, tag="usage"):
    """What the whole tree used (the init's ``RUSAGE_CHILDREN``)."""

    user_s: float
    system_s: float
    maxrss_bytes: int


class Disk(msgspec.Struct, frozen=True, tag="disk"):
    """Bytes in use on the scratch tmpfs when the command ended."""

    used_bytes: int


class RetainedUse(msgspec.Struct, frozen=True, tag="retained"):
    """Bytes in use on one retained copy, by its target inside."""

    used_bytes: int
    target: str


StatusMessage = (
    Unshared
    | Ready
    | Started
    | ExecFailed
    | SetupFailed
    | Exited
    | Signaled
    | Usage
    | Disk
    | RetainedUse
)


class StatusLineError(ValueError):
    """A status line that is not a message of the channel (a bug, never the command's doing:
    the command never holds the pipe)."""


def _clean(text: str) -> str:
    return text.replace("\n", " ").replace("\r", " ")


def encode(message: StatusMessage) -> bytes:
    """One message as its line (newline included; free text has its newlines removed)."""
    if isinstance(message, Unshared | Started):
        line = type(message).__struct_config__.tag
    elif isinstance(message, Ready):
        line = f"ready {message.setup_cpu_s:.6f}"
    elif isinstance(message, ExecFailed):
        line = f"exec {message.errno}" + (f" {_clean(message.detail)}" if message.detail else "")
    elif isinstance(message, SetupFailed):
        line = f"setup {_clean(message.message)}"
    elif isinstance(message, Exited):
        line = f"exit {message.code}"
    elif isinstance(message, Signaled):
        line = f"signal {message.signum}"
    elif isinstance(message, Usage):
        line = f"usage {message.user_s:.6f} {message.system_s:.6f} {message.maxrss_bytes}"
    elif isinstance(message, Disk):
        line = f"disk {message.used_bytes}"
    else:
        line = f"retained {message.used_bytes} {_clean(message.target)}"
    data = (str(line) + "\n").encode("utf-8", errors="replace")
    if len(data) > MAX_STATUS_LINE_BYTES:
        data = data[: MAX_STATUS_LINE_BYTES - 1] + b"\n"
    return data


def _int(text: str, line: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise StatusLineError(f"not a number in status line {line!r}") from None


def _seconds(text: str, line: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise StatusLineError(f"not a number in status line {line!r}") from None
    if not math.isfinite(value) or value < 0:
        raise StatusLineError(f"not a duration in status line {line!r}")
    return value


def decode_line(raw: bytes) -> StatusMessage:  # noqa: PLR0911 - one return per message kind
    """Decode one line (without its newline).

    Raises:
        StatusLineError: not a message of the channel.
    """
    line = raw.decode("utf-8", errors="replace")
    word, _, rest = line.partition(" ")
    if not rest and word == "unshared":
        return Unshared()
    if word == "ready":
        return Ready(_seconds(rest, line)) if rest else Ready()
    if not rest and word == "started":
        return Started()
    if word == "setup":
        return SetupFailed(rest)
    if word == "exec":
        number, _, detail = rest.partition(" ")
        return ExecFailed(_int(number, line), detail)
    if word == "exit":
        return Exited(_int(rest, line))
    if word == "signal":
        return Signaled(_int(rest, line))
    if word == "disk":
        return Disk(_int(rest, line))
    if word == "retained":
        count, _, target = rest.partition(" ")
        return RetainedUse(_int(count, line), target)
    if word == "usage":
        parts = rest.split(" ")
        if len(parts) != 3:
            raise StatusLineError(f"malformed status line {line!r}")
        try:
            return Usage(float(parts[0]), float(parts[1]), int(parts[2]))
        except ValueError:
            raise StatusLineError(f"malformed status line {line!r}") from None
    raise StatusLineError(f"unknown status line {line[:80]!r}")


class StatusDecoder:
    """Bytes in, status messages out; bounded.

    :attr:`dropped` counts bytes beyond :data:`MAX_STATUS_BYTES` (never buffered).
    """

    def __init__(self, max_bytes: int = MAX_STATUS_BYTES) -> None:
        self._buffer = bytearray()
        self._seen = 0
        self._max = max_bytes
        self.dropped = 0

    def feed(self, data: bytes) -> list[StatusMessage]:
        """Take ``data``; return every complete message in it.

        Raises:
            StatusLineError: a line is not a message, or longer than the line cap.
        """
        room = max(0, self._max - self._seen)
        if len(data) > room:
            self.dropped += len(data) - room
            data = data[:room]
        self._seen += len(data)
        self._buffer += data
        messages: list[StatusMessage] = []
        while (end := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            messages.append(decode_line(line))
        if len(self._buffer) > MAX_STATUS_LINE_BYTES:
            raise StatusLineError(f"a status line longer than {MAX_STATUS_LINE_BYTES} bytes")
        return messages

    def close(self) -> list[StatusMessage]:
        """End of the pipe: a last line without its newline still counts.

        Raises:
            StatusLineError: it is not a message.
        """
        if not self._buffer:
            return []
        line = bytes(self._buffer)
        self._buffer.clear()
        return [decode_line(line)]
